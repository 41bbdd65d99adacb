#include "grammar/matcher.h"

#include <gtest/gtest.h>

#include <random>

#include "base/error.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/test_util.h"

namespace rs::grammar {
namespace {

using testing::compile_for_test;
using testing::fullmatch;

TEST(GrammarMatcher, AcceptsSentencesAndRejectsOthers) {
  const auto g = compile_for_test(parse_gbnf(R"G(root ::= "(" list? ")"
list ::= item ("," item)*
item ::= [a-z]+ | root)G"));
  EXPECT_TRUE(fullmatch(g, "()"));
  EXPECT_TRUE(fullmatch(g, "(ab,c)"));
  EXPECT_TRUE(fullmatch(g, "(a,(b,(c)),())"));
  EXPECT_FALSE(fullmatch(g, "(a,)"));
  EXPECT_FALSE(fullmatch(g, "(a"));
  EXPECT_FALSE(fullmatch(g, "(A)"));
  EXPECT_FALSE(fullmatch(g, "()x"));
}

TEST(GrammarMatcher, RefusedInputLeavesTheStateUnchanged) {
  GrammarMatcher m(compile_for_test(parse_gbnf(R"(root ::= "ab" "c"*)")));
  EXPECT_FALSE(m.can_finish());
  EXPECT_FALSE(m.accept_bytes("ax"));
  EXPECT_TRUE(m.accept_bytes("a"));
  EXPECT_FALSE(m.accept_bytes("a"));
  EXPECT_TRUE(m.accept_bytes("b"));
  EXPECT_TRUE(m.can_finish());
  EXPECT_FALSE(m.terminated());  // more c's may follow
}

TEST(GrammarMatcher, TerminatesWhenNothingMayFollow) {
  GrammarMatcher m(compile_for_test(parse_gbnf(R"(root ::= "yes" | "no")")));
  EXPECT_TRUE(m.accept_bytes("no"));
  EXPECT_TRUE(m.can_finish());
  EXPECT_TRUE(m.terminated());
}

TEST(GrammarMatcher, RollsBackTokens) {
  GrammarMatcher m(compile_for_test(parse_gbnf(R"(root ::= "abc" | "abd")")), 4);
  ASSERT_TRUE(m.accept_bytes("a"));
  ASSERT_TRUE(m.accept_bytes("bc"));
  EXPECT_TRUE(m.can_finish());
  m.rollback(1);
  EXPECT_FALSE(m.can_finish());
  EXPECT_TRUE(m.accept_bytes("bd"));
  EXPECT_TRUE(m.can_finish());
  m.rollback(2);
  EXPECT_TRUE(m.accept_bytes("abc"));
  EXPECT_THROW(m.rollback(5), Error);
}

TEST(GrammarMatcher, RollbackKeepsOnlyTheLastStates) {
  GrammarMatcher m(compile_for_test(parse_gbnf(R"(root ::= "a"*)")), 2);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(m.accept_bytes("a"));
  EXPECT_EQ(m.num_rollback_states(), 2);
  m.rollback(2);
  EXPECT_EQ(m.num_rollback_states(), 0);
}

TEST(GrammarMatcher, LongRepetitionKeepsTheStackFlat) {
  // Tail calls return to the caller's continuation, so 100k repetitions create no new stack nodes per byte.
  const auto g = compile_for_test(parse_gbnf(R"(root ::= "[" ("x" | "yy")* "]")"));
  std::string text = "[";
  for (int i = 0; i < 100000; ++i) text += i % 3 ? "x" : "yy";
  text += "]";
  EXPECT_TRUE(fullmatch(g, text));
}

TEST(GrammarMatcher, RejectsLeftRecursionAndUndefinedRules) {
  try {
    compile_for_test(parse_gbnf("root ::= root \"a\" | \"a\""));
    FAIL() << "left recursion accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left-recursive"), std::string::npos) << e.what();
  }
  try {
    compile_for_test(parse_gbnf("root ::= x* \nx ::= \"a\"?"));
    FAIL() << "nullable repetition accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left-recursive"), std::string::npos) << e.what();
  }
  try {
    compile_for_test(parse_gbnf("root ::= missing"));
    FAIL() << "undefined rule accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined rule 'missing'"), std::string::npos) << e.what();
  }
}

TEST(GrammarMatcher, HugelyAmbiguousGrammarsFailInsteadOfStalling) {
  // Each byte of this grammar may sit at any of 4000 x 4000 places.
  const auto g = compile_for_test(parse_gbnf(R"(root ::= ("a"{0,4000}){0,4000} "b")"));
  EXPECT_THROW(
      {
        GrammarMatcher m(g);
        m.accept_bytes("aa");
      },
      Error);
}

// 4000 random lowercase tokens of 1-8 bytes: a vocabulary large enough for masks to cost real work.
std::shared_ptr<const TokenVocab> random_vocab() {
  std::mt19937 rng(11);
  std::vector<std::string> tokens;
  for (int i = 0; i < 4000; ++i) {
    std::string token(1 + rng() % 8, 'a');
    for (char& c : token) c = static_cast<char>('a' + rng() % 26);
    tokens.push_back(std::move(token));
  }
  return TokenVocab::from_bytes(std::move(tokens));
}

// Nested bounded repetitions put hundreds of entries in a state, each mask walking them over the vocabulary: without
// a bound one mask took a minute on the scheduler thread. Masks fail cleanly past GrammarMatcher::kMaxWork instead.
TEST(GrammarMatcher, TokenMasksOfAmbiguousGrammarsStopAtTheWorkBudget) {
  const auto vocab = random_vocab();
  const auto g = std::make_shared<const CompiledGrammar>(lower_rules(parse_gbnf("root ::= ([a-z]{0,10}){10}")), vocab);
  GrammarMatcher m(g);
  std::vector<uint32_t> mask(bitmask_words(vocab->size()));
  try {
    for (int step = 0; step < 20; ++step) {
      m.fill_next_token_bitmask(mask, {});
      ASSERT_TRUE(m.accept_bytes("abcdefgh"));
    }
    FAIL() << "no mask ran out of budget";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("grammar too complex: ")) << e.what();
  }
  // An ordinary grammar over the same vocabulary stays far below the budget.
  const auto json = std::make_shared<const CompiledGrammar>(lower_rules(json_object_rules()), vocab);
  GrammarMatcher object(json);
  for (const char* piece : {"{", "\"", "key", "\": ", "[", "1", ", \"", "text"}) {
    EXPECT_NO_THROW(object.fill_next_token_bitmask(mask, {}));
    ASSERT_TRUE(object.accept_bytes(piece)) << piece;
  }
}

// A request's matcher also has a budget over its whole life: a grammar whose each mask fits kMaxWork still cannot
// keep taking scheduler time without end. A small total shows it: the first operation past it throws, and the work
// counted matches what the operations did.
TEST(GrammarMatcher, TotalWorkOfOneRequestIsBounded) {
  const auto vocab = random_vocab();
  const auto g = std::make_shared<const CompiledGrammar>(lower_rules(parse_gbnf("root ::= [a-z]+")), vocab);
  GrammarMatcher unbounded(g);
  std::vector<uint32_t> mask(bitmask_words(vocab->size()));
  unbounded.fill_next_token_bitmask(mask, {});
  ASSERT_TRUE(unbounded.accept_bytes("abc"));
  const uint64_t spent = unbounded.total_work();
  ASSERT_GT(spent, 0u);

  const auto fresh = std::make_shared<const CompiledGrammar>(lower_rules(parse_gbnf("root ::= [a-z]+")), vocab);
  GrammarMatcher bounded(fresh, 16, spent / 2);  // a fresh grammar: its mask is not cached yet
  std::vector<uint32_t> same(bitmask_words(vocab->size()));
  bounded.fill_next_token_bitmask(same, {});  // within the budget when it starts
  EXPECT_EQ(same, mask);
  try {
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(bounded.accept_bytes("abc"));
    FAIL() << "the total budget never ran out";
  } catch (const Error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("grammar too complex: this request's token masks")) << e.what();
  }
}

TEST(GrammarMatcher, UnicodeClassesMatchWholeUtf8Characters) {
  const auto g = compile_for_test(parse_gbnf(R"(root ::= [^a]+)"));
  EXPECT_TRUE(fullmatch(g, "é日本😀"));
  EXPECT_FALSE(fullmatch(g, "éa"));
  EXPECT_FALSE(fullmatch(g, "\xC3"));          // truncated character
  EXPECT_FALSE(fullmatch(g, "\xED\xA0\x80"));  // a surrogate is not a character
  EXPECT_FALSE(fullmatch(g, "\xC0\xAF"));      // overlong
  const auto greek = compile_for_test(parse_gbnf(R"(root ::= [α-ω]{2,3})"));
  EXPECT_TRUE(fullmatch(greek, "αβ"));
  EXPECT_TRUE(fullmatch(greek, "ωψχ"));
  EXPECT_FALSE(fullmatch(greek, "α"));
  EXPECT_FALSE(fullmatch(greek, "αβγδ"));
  EXPECT_FALSE(fullmatch(greek, "Α"));  // capital alpha
}

}  // namespace
}  // namespace rs::grammar
