#include "loader/torch_pickle.h"

#include <initializer_list>
#include <memory>
#include <unordered_map>

#include "base/error.h"

namespace rs::loader {
namespace {

constexpr size_t kMaxPickleBytes = size_t{256} << 20;  // ~1M tensors at torch's ~200 bytes each
constexpr size_t kMaxRank = 8;                         // torch allows more; no weight has it (Tensor holds 5)
constexpr size_t kMaxNameBytes = 256;                  // a global's "module.name"
constexpr size_t kMaxKeyBytes = 64;                    // a storage key (torch writes a decimal number)

// A pickled object. Objects live in the machine's arena and refer to each other by pointer, so the reference cycles
// that a pickle may build (a list appended to itself through the memo) cannot leak.
struct Value {
  enum class Kind { kNone, kBool, kInt, kFloat, kString, kTuple, kList, kDict, kGlobal, kStorage, kTensor };
  Kind kind = Kind::kNone;
  bool untyped = false;       // a storage: torch.UntypedStorage (bytes; the tensor names its dtype)
  DType dtype = DType::kU8;   // a typed storage's elements
  int64_t integer = 0;        // an int or bool; a float's bits; a tensor's index in Machine::tensors()
  std::string text;           // a string; "module.name" of a global; a storage's key
  std::vector<Value*> items;  // tuple and list elements; a dict's keys and values, alternating
};

using Kind = Value::Kind;

bool lookup(std::string_view name, std::initializer_list<std::pair<std::string_view, DType>> table, DType* out) {
  for (const auto& [key, dtype] : table)
    if (key == name) {
      *out = dtype;
      return true;
    }
  return false;
}

// The typed storage classes torch.save names (torch.<Name>Storage) and their element types.
bool storage_dtype(std::string_view global, DType* out) {
  return lookup(global,
                {{"torch.FloatStorage", DType::kF32},
                 {"torch.BFloat16Storage", DType::kBF16},
                 {"torch.HalfStorage", DType::kF16},
                 {"torch.DoubleStorage", DType::kF64},
                 {"torch.LongStorage", DType::kI64},
                 {"torch.IntStorage", DType::kI32},
                 {"torch.ShortStorage", DType::kI16},
                 {"torch.CharStorage", DType::kI8},
                 {"torch.ByteStorage", DType::kU8},
                 {"torch.BoolStorage", DType::kBool}},
                out);
}

// torch dtypes by name: _rebuild_tensor_v3 (torch >= 2.1) names one for the dtypes that have no typed storage class
// (float8, uint16/32/64), over an untyped byte storage.
bool torch_dtype(std::string_view global, DType* out) {
  return lookup(global,
                {{"torch.float8_e4m3fn", DType::kF8E4M3},
                 {"torch.float8_e5m2", DType::kF8E5M2},
                 {"torch.float8_e8m0fnu", DType::kF8E8M0},
                 {"torch.uint16", DType::kU16},
                 {"torch.uint32", DType::kU32},
                 {"torch.uint64", DType::kU64},
                 {"torch.float32", DType::kF32},
                 {"torch.bfloat16", DType::kBF16},
                 {"torch.float16", DType::kF16},
                 {"torch.float64", DType::kF64},
                 {"torch.int64", DType::kI64},
                 {"torch.int32", DType::kI32},
                 {"torch.int16", DType::kI16},
                 {"torch.int8", DType::kI8},
                 {"torch.uint8", DType::kU8},
                 {"torch.bool", DType::kBool}},
                out);
}

class Machine {
 public:
  // Objects, strings and copies are charged against a budget proportional to the input (a real data.pkl builds a
  // few times its size), so a small pickle cannot build large ones by recalling memo entries over and over.
  Machine(std::string_view in, const std::string& source)
      : in_(in), source_(source), budget_(32 * in.size() + (size_t{16} << 20)) {
    none_ = make(Kind::kNone);
    true_ = integer(Kind::kBool, 1);
    false_ = integer(Kind::kBool, 0);
  }

  const std::vector<PickledTensor>& tensors() const { return tensors_; }

  Value* run() {
    while (true) {
      const uint8_t op = byte();
      switch (op) {
        case 0x80: {  // PROTO
          const uint8_t proto = byte();
          RS_CHECK(proto <= 5, "{}: pickle protocol {} is newer than 5", source_, proto);
          break;
        }
        case 0x95: skip(8); break;  // FRAME: a length hint only
        case '.': {                 // STOP
          RS_CHECK(marks_.empty(), "{}: pickle stops inside an unclosed mark", source_);
          RS_CHECK(stack_.size() == 1, "{}: pickle stops with {} objects on its stack, not one", source_,
                   stack_.size());
          return stack_.back();
        }
        case '(': marks_.push_back(stack_.size()); break;
        case ')': push(make(Kind::kTuple)); break;
        case ']': push(make(Kind::kList)); break;
        case '}': push(make(Kind::kDict)); break;
        case 't': push(sequence(Kind::kTuple, pop_mark())); break;
        case 0x85:
        case 0x86:
        case 0x87: {  // TUPLE1..3
          const size_t n = op - 0x84;
          RS_CHECK(stack_.size() >= base() + n, "{}: pickle builds a tuple from an empty stack", source_);
          std::vector<Value*> items(stack_.end() - n, stack_.end());
          stack_.resize(stack_.size() - n);
          push(sequence(Kind::kTuple, std::move(items)));
          break;
        }
        case 'l': push(sequence(Kind::kList, pop_mark())); break;
        case 'd': {
          auto items = pop_mark();
          RS_CHECK(items.size() % 2 == 0, "{}: pickle builds a dict from an odd number of items", source_);
          push(sequence(Kind::kDict, std::move(items)));
          break;
        }
        case 'N': push(none_); break;
        case 0x88: push(true_); break;
        case 0x89: push(false_); break;
        case 'K': push(integer(Kind::kInt, byte())); break;
        case 'M': push(integer(Kind::kInt, static_cast<int64_t>(little(2)))); break;
        case 'J': push(integer(Kind::kInt, static_cast<int32_t>(little(4)))); break;
        case 0x8a: push(integer(Kind::kInt, long1())); break;
        case 'G': {  // BINFLOAT, big-endian; kept as bits (never read)
          uint64_t bits = 0;
          for (int i = 0; i < 8; ++i) bits = (bits << 8) | byte();
          push(integer(Kind::kFloat, static_cast<int64_t>(bits)));
          break;
        }
        case 'X': push(string(little(4))); break;  // BINUNICODE
        case 0x8c:
        case 'U':
        case 'C': push(string(byte())); break;  // SHORT_BINUNICODE, SHORT_BINSTRING, SHORT_BINBYTES
        case 0x8d:
        case 0x8e: push(string(little(8))); break;  // BINUNICODE8, BINBYTES8
        case 'T':
        case 'B': push(string(little(4))); break;  // BINSTRING, BINBYTES
        case 'c': {                                // GLOBAL "module\nname\n"
          const std::string module = line();
          push(global(module, line()));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          Value* name = pop();
          Value* module = pop();
          RS_CHECK(module->kind == Kind::kString && name->kind == Kind::kString, "{}: pickle names a global oddly",
                   source_);
          push(global(module->text, name->text));
          break;
        }
        case 'q': memo_[byte()] = top(); break;
        case 'r': memo_[little(4)] = top(); break;
        case 0x94: memo_[memo_.size()] = top(); break;  // MEMOIZE
        case 'h': push(recall(byte())); break;
        case 'j': push(recall(little(4))); break;
        case '0': pop(); break;
        case '1': pop_mark(); break;
        case '2': push(top()); break;
        case 's': {
          Value* value = pop();
          Value* key = pop();
          add_to(Kind::kDict, {key, value});
          break;
        }
        case 'u': {
          auto items = pop_mark();
          RS_CHECK(items.size() % 2 == 0, "{}: pickle sets a dict from an odd number of items", source_);
          add_to(Kind::kDict, items);
          break;
        }
        case 'a': add_to(Kind::kList, {pop()}); break;
        case 'e': add_to(Kind::kList, pop_mark()); break;
        case 'R':
        case 0x81: {  // REDUCE, NEWOBJ: callable(*args)
          Value* args = pop();
          Value* callable = pop();
          push(call(callable, args));
          break;
        }
        case 'b': {  // BUILD: state set on an object (a state dict's _metadata); nothing we need.
          pop();
          top();
          break;
        }
        case 'Q': push(storage(pop())); break;  // BINPERSID
        default: RS_FAIL("{}: pickle opcode 0x{:02x} at byte {} is not one torch.save writes", source_, op, pos_ - 1);
      }
    }
  }

 private:
  uint8_t byte() {
    RS_CHECK(pos_ < in_.size(), "{}: pickle ends without a STOP (truncated?)", source_);
    return static_cast<uint8_t>(in_[pos_++]);
  }
  void skip(uint64_t n) {
    RS_CHECK(n <= in_.size() - pos_, "{}: pickle ends inside an opcode (truncated?)", source_);
    pos_ += n;
  }
  uint64_t little(int bytes) {
    uint64_t value = 0;
    for (int i = 0; i < bytes; ++i) value |= static_cast<uint64_t>(byte()) << (8 * i);
    return value;
  }
  int64_t long1() {  // little-endian two's complement of n bytes
    const uint8_t n = byte();
    RS_CHECK(n <= 8, "{}: pickle integer of {} bytes does not fit 64 bits", source_, n);
    if (n == 0) return 0;
    uint64_t value = little(n);
    if (n < 8 && (value >> (8 * n - 1)) & 1) value |= ~uint64_t{0} << (8 * n);
    return static_cast<int64_t>(value);
  }
  std::string line() {
    const size_t end = in_.find('\n', pos_);
    RS_CHECK(end != std::string_view::npos, "{}: pickle global lacks its newline", source_);
    RS_CHECK(end - pos_ < kMaxNameBytes, "{}: pickle names a global of {} bytes", source_, end - pos_);
    std::string text(in_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return text;
  }

  void charge(size_t bytes) {
    RS_CHECK(bytes <= budget_,
             "{}: the pickle builds far more than a state dict of its size needs (malformed or hostile)", source_);
    budget_ -= bytes;
  }
  Value* make(Kind kind) {
    charge(sizeof(Value) + sizeof(void*));
    arena_.push_back(std::make_unique<Value>());
    arena_.back()->kind = kind;
    return arena_.back().get();
  }
  Value* integer(Kind kind, int64_t n) {
    Value* value = make(kind);
    value->integer = n;
    return value;
  }
  Value* string(uint64_t bytes) {
    const size_t start = pos_;
    skip(bytes);
    charge(bytes);
    Value* value = make(Kind::kString);
    value->text.assign(in_.substr(start, bytes));
    return value;
  }
  Value* sequence(Kind kind, std::vector<Value*> items) {
    charge(items.size() * sizeof(Value*));
    Value* value = make(kind);
    value->items = std::move(items);
    return value;
  }
  Value* global(const std::string& module, const std::string& name) {
    RS_CHECK(module.size() + name.size() < kMaxNameBytes, "{}: pickle names a global of {} bytes", source_,
             module.size() + name.size() + 1);
    Value* value = make(Kind::kGlobal);
    value->text = module + "." + name;
    return value;
  }
  Value* recall(uint64_t key) {
    auto it = memo_.find(key);
    RS_CHECK(it != memo_.end(), "{}: pickle recalls memo entry {} that was never stored", source_, key);
    return it->second;
  }

  size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  void push(Value* value) { stack_.push_back(value); }
  Value* top() {
    RS_CHECK(stack_.size() > base(), "{}: pickle reads an empty stack", source_);
    return stack_.back();
  }
  Value* pop() {
    Value* value = top();
    stack_.pop_back();
    return value;
  }
  std::vector<Value*> pop_mark() {
    RS_CHECK(!marks_.empty(), "{}: pickle closes a mark it never opened", source_);
    std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  void add_to(Kind kind, const std::vector<Value*>& items) {
    Value* target = top();
    RS_CHECK(target->kind == kind, "{}: pickle adds items to something that is not a {}", source_,
             kind == Kind::kDict ? "dict" : "list");
    charge(items.size() * sizeof(Value*));
    target->items.insert(target->items.end(), items.begin(), items.end());
  }

  // BINPERSID: torch.save's reference to a storage record, ('storage', torch.<Type>Storage, key, location, numel).
  Value* storage(Value* pid) {
    RS_CHECK(pid->kind == Kind::kTuple && pid->items.size() >= 5 && pid->items[0]->kind == Kind::kString &&
                 pid->items[0]->text == "storage" && pid->items[1]->kind == Kind::kGlobal &&
                 pid->items[2]->kind == Kind::kString,
             "{}: pickle refers to an object that is not a torch storage", source_);
    const std::string& type = pid->items[1]->text;
    const std::string& key = pid->items[2]->text;
    RS_CHECK(key.size() <= kMaxKeyBytes, "{}: pickle names a storage key of {} bytes", source_, key.size());
    charge(key.size());
    Value* value = make(Kind::kStorage);
    value->untyped = type == "torch.UntypedStorage";
    RS_CHECK(value->untyped || storage_dtype(type, &value->dtype),
             "{}: storage type {} is not supported (complex or quantized tensors?)", source_, type);
    value->text = key;
    return value;
  }

  std::vector<int64_t> ints(const Value* tuple, const char* what) {
    RS_CHECK(tuple->kind == Kind::kTuple, "{}: a tensor's {} is not a tuple", source_, what);
    RS_CHECK(tuple->items.size() <= kMaxRank, "{}: a tensor of rank {} (at most {} are read)", source_,
             tuple->items.size(), kMaxRank);
    charge(tuple->items.size() * sizeof(int64_t));
    std::vector<int64_t> out;
    for (const Value* item : tuple->items) {
      RS_CHECK(item->kind == Kind::kInt && item->integer >= 0, "{}: a tensor's {} holds {}, not a size", source_, what,
               item->kind == Kind::kInt ? std::to_string(item->integer) : std::string("a non-integer"));
      out.push_back(item->integer);
    }
    return out;
  }

  // _rebuild_tensor_v2: (storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]) over a
  // typed storage. _rebuild_tensor_v3 (torch >= 2.1, dtypes without a typed storage): the same over an untyped
  // storage with the dtype after backward_hooks, then the metadata.
  Value* rebuild_tensor(const std::vector<Value*>& a, bool v3) {
    const size_t fixed = v3 ? 7 : 6;
    RS_CHECK(a.size() >= fixed && a.size() <= fixed + 1 && a[0]->kind == Kind::kStorage && a[0]->untyped == v3 &&
                 a[1]->kind == Kind::kInt && a[1]->integer >= 0,
             "{}: _rebuild_tensor_v{} has unexpected arguments", source_, v3 ? 3 : 2);
    DType dtype = a[0]->dtype;
    RS_CHECK(!v3 || (a[6]->kind == Kind::kGlobal && torch_dtype(a[6]->text, &dtype)),
             "{}: a tensor of dtype {} is not supported", source_, a[6]->kind == Kind::kGlobal ? a[6]->text : "?");
    // Metadata flags a view whose values are not the stored ones (neg, conj): refused, never read wrongly.
    if (a.size() > fixed) {
      const Value* metadata = a[fixed];
      RS_CHECK(metadata->kind == Kind::kNone || metadata->kind == Kind::kDict, "{}: tensor metadata is not a dict",
               source_);
      for (size_t i = 0; i + 1 < metadata->items.size(); i += 2) {
        const Value* flag = metadata->items[i + 1];
        RS_CHECK(!((flag->kind == Kind::kBool || flag->kind == Kind::kInt) && flag->integer != 0),
                 "{}: a tensor is saved as a '{}' view; save it after .resolve_neg() / .resolve_conj(), or as "
                 "safetensors",
                 source_, metadata->items[i]->kind == Kind::kString ? metadata->items[i]->text : "flagged");
      }
    }
    PickledTensor tensor{.storage_key = a[0]->text,
                         .dtype = dtype,
                         .storage_offset = a[1]->integer,
                         .shape = ints(a[2], "size"),
                         .stride = ints(a[3], "stride")};
    RS_CHECK(tensor.shape.size() == tensor.stride.size(), "{}: a tensor has {} sizes but {} strides", source_,
             tensor.shape.size(), tensor.stride.size());
    charge(sizeof(PickledTensor) + a[0]->text.size());
    tensors_.push_back(std::move(tensor));
    return integer(Kind::kTensor, static_cast<int64_t>(tensors_.size() - 1));
  }

  Value* call(Value* callable, Value* args) {
    RS_CHECK(callable->kind == Kind::kGlobal && args->kind == Kind::kTuple,
             "{}: pickle calls something that is not a named function", source_);
    const std::string& name = callable->text;
    const auto& a = args->items;
    if (name == "collections.OrderedDict" && a.empty()) return make(Kind::kDict);
    if (name == "torch._utils._rebuild_tensor_v2") return rebuild_tensor(a, false);
    if (name == "torch._utils._rebuild_tensor_v3") return rebuild_tensor(a, true);
    if (name == "torch._utils._rebuild_parameter" || name == "torch._utils._rebuild_parameter_with_state") {
      RS_CHECK(!a.empty() && a[0]->kind == Kind::kTensor, "{}: {} has unexpected arguments", source_, name);
      return a[0];
    }
    RS_FAIL(
        "{}: the pickle calls {}, which is not part of a PyTorch state dict; only tensors are read from "
        "pytorch_model.bin (convert other checkpoints to safetensors)",
        source_, name);
  }

  std::string_view in_;
  const std::string& source_;
  size_t budget_;
  size_t pos_ = 0;
  std::vector<std::unique_ptr<Value>> arena_;
  Value* none_ = nullptr;
  Value* true_ = nullptr;
  Value* false_ = nullptr;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  std::vector<PickledTensor> tensors_;
};

bool holds_tensors(const Value* dict) {
  for (size_t i = 1; i < dict->items.size(); i += 2)
    if (dict->items[i]->kind == Kind::kTensor) return true;
  return false;
}

}  // namespace

std::vector<PickledTensor> read_pickled_state_dict(std::string_view pickle, const std::string& source) {
  RS_CHECK(pickle.size() <= kMaxPickleBytes, "{}: data.pkl of {} bytes is larger than any state dict's", source,
           pickle.size());
  Machine machine(pickle, source);
  const Value* root = machine.run();
  RS_CHECK(root->kind == Kind::kDict, "{}: the pickle holds no state dict (a dict of tensors)", source);
  if (!holds_tensors(root)) {
    // A training checkpoint ({"model": state_dict, "epoch": ...}): say where the weights are.
    for (size_t i = 0; i + 1 < root->items.size(); i += 2) {
      const Value* key = root->items[i];
      const Value* value = root->items[i + 1];
      RS_CHECK(!(key->kind == Kind::kString && value->kind == Kind::kDict && holds_tensors(value)),
               "{}: the tensors are nested under '{}' (a training checkpoint?); save that state dict alone, e.g. "
               "torch.save(checkpoint['{}'], 'pytorch_model.bin')",
               source, key->text, key->text);
    }
  }
  // Entries may share a tensor through the memo; each gets its own copy, within the same kind of budget.
  std::vector<PickledTensor> tensors;
  size_t copied = 0;
  for (size_t i = 0; i + 1 < root->items.size(); i += 2) {
    const Value* key = root->items[i];
    const Value* value = root->items[i + 1];
    if (value->kind != Kind::kTensor) continue;
    RS_CHECK(key->kind == Kind::kString, "{}: a state dict key is not a string", source);
    const PickledTensor& tensor = machine.tensors()[static_cast<size_t>(value->integer)];
    copied += sizeof(PickledTensor) + key->text.size() + 2 * sizeof(int64_t) * tensor.shape.size();
    RS_CHECK(copied <= 32 * pickle.size() + (size_t{16} << 20),
             "{}: the state dict repeats its tensors far more than a real one (malformed or hostile)", source);
    tensors.push_back(tensor);
    tensors.back().name = key->text;
  }
  return tensors;
}

}  // namespace rs::loader
