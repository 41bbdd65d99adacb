// The grammar of plain JSON values, shared by the schema compiler and json_object.
#include "grammar/json_schema.h"

namespace rs::grammar {

void add_json_value_rules(RuleSet& rules) {
  if (rules.has("json-value")) return;
  using E = Expr;
  // Between tokens: nothing, one space, or a newline and up to 20 spaces or tabs of indentation.
  rules.add("ws", E::alt({E::empty(), E::bytes(" "),
                          E::seq({E::bytes("\n"), E::repeat(E::char_class({{' ', ' '}, {'\t', '\t'}}), 0, 20)})}));
  rules.add(
      "json-char",
      E::alt({E::char_class({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true),
              E::seq({E::bytes("\\"),
                      E::alt({E::char_class({{'"', '"'},
                                             {'\\', '\\'},
                                             {'/', '/'},
                                             {'b', 'b'},
                                             {'f', 'f'},
                                             {'n', 'n'},
                                             {'r', 'r'},
                                             {'t', 't'}}),
                              E::seq({E::bytes("u"),
                                      E::repeat(E::char_class({{'0', '9'}, {'a', 'f'}, {'A', 'F'}}), 4, 4)})})})}));
  rules.add("json-string", E::seq({E::bytes("\""), E::repeat(E::ref("json-char"), 0, -1), E::bytes("\"")}));
  const E digits = E::repeat(E::char_class({{'0', '9'}}), 1, -1);
  rules.add(
      "json-natural",
      E::alt({E::bytes("0"), E::seq({E::char_class({{'1', '9'}}), E::repeat(E::char_class({{'0', '9'}}), 0, -1)})}));
  rules.add("json-integer", E::seq({E::repeat(E::bytes("-"), 0, 1), E::ref("json-natural")}));
  rules.add("json-fraction", E::seq({E::bytes("."), digits}));
  // At most two exponent digits: every number stays a finite double (1e999 is valid JSON that parsers turn into inf).
  rules.add("json-exponent",
            E::seq({E::char_class({{'e', 'e'}, {'E', 'E'}}), E::repeat(E::char_class({{'+', '+'}, {'-', '-'}}), 0, 1),
                    E::repeat(E::char_class({{'0', '9'}}), 1, 2)}));
  rules.add("json-number", E::seq({E::ref("json-integer"), E::repeat(E::ref("json-fraction"), 0, 1),
                                   E::repeat(E::ref("json-exponent"), 0, 1)}));
  rules.add("json-boolean", E::alt({E::bytes("true"), E::bytes("false")}));
  rules.add("json-null", E::bytes("null"));
  rules.add("json-member",
            E::seq({E::ref("json-string"), E::ref("ws"), E::bytes(":"), E::ref("ws"), E::ref("json-value")}));
  rules.add(
      "json-object",
      E::seq({E::bytes("{"), E::ref("ws"),
              E::repeat(E::seq({E::ref("json-member"), E::ref("ws"),
                                E::repeat(E::seq({E::bytes(","), E::ref("ws"), E::ref("json-member"), E::ref("ws")}), 0,
                                          -1)}),
                        0, 1),
              E::bytes("}")}));
  rules.add(
      "json-array",
      E::seq({E::bytes("["), E::ref("ws"),
              E::repeat(
                  E::seq({E::ref("json-value"), E::ref("ws"),
                          E::repeat(E::seq({E::bytes(","), E::ref("ws"), E::ref("json-value"), E::ref("ws")}), 0, -1)}),
                  0, 1),
              E::bytes("]")}));
  rules.add("json-value", E::alt({E::ref("json-object"), E::ref("json-array"), E::ref("json-string"),
                                  E::ref("json-number"), E::ref("json-boolean"), E::ref("json-null")}));
}

RuleSet json_object_rules() {
  RuleSet rules;
  add_json_value_rules(rules);
  rules.add("root", Expr::ref("json-object"));
  return rules;
}

}  // namespace rs::grammar
