#include "core/graph/op_def.h"

#include <algorithm>
#include <cctype>
#include <utility>

#include "core/config/literal.h"
#include "core/config/value.h"

namespace weft {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool IsIdentifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

const std::vector<DType>& Named(std::string_view set) {
  static const std::vector<DType> kFloat = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64};
  static const std::vector<DType> kInt = {DType::kI8, DType::kI16, DType::kI32, DType::kI64, DType::kU8};
  static const std::vector<DType> kIndex = {DType::kI32, DType::kI64};
  static const std::vector<DType> kNumeric = {DType::kF16, DType::kBF16, DType::kF32, DType::kF64, DType::kI8,
                                              DType::kI16, DType::kI32,  DType::kI64, DType::kU8};
  static const std::vector<DType> kAll = {DType::kF16, DType::kBF16, DType::kF32,   DType::kF64,
                                          DType::kI8,  DType::kI16,  DType::kI32,   DType::kI64,
                                          DType::kU8,  DType::kBool, DType::kString};
  static const std::vector<DType> kNone;
  if (set == "float") return kFloat;
  if (set == "int") return kInt;
  if (set == "index") return kIndex;
  if (set == "numeric") return kNumeric;
  if (set == "all") return kAll;
  return kNone;
}

std::optional<AttrType> ParseAttrType(std::string_view text) {
  static const std::pair<std::string_view, AttrType> kTypes[] = {
      {"int", AttrType::kInt},
      {"float", AttrType::kFloat},
      {"bool", AttrType::kBool},
      {"string", AttrType::kString},
      {"type", AttrType::kType},
      {"shape", AttrType::kShape},
      {"tensor", AttrType::kTensor},
      {"func", AttrType::kFunc},
      {"list(int)", AttrType::kIntList},
      {"list(float)", AttrType::kFloatList},
      {"list(bool)", AttrType::kBoolList},
      {"list(string)", AttrType::kStringList},
      {"list(type)", AttrType::kTypeList},
      {"list(shape)", AttrType::kShapeList},
  };
  for (const auto& [name, type] : kTypes) {
    if (name == text) return type;
  }
  return std::nullopt;
}

// Converts a TOML-ish literal default ("-1", "1e-5", "true", "'SAME'",
// "[1, 1]") to an AttrValue of |type|.
Expected<AttrValue> ParseDefault(std::string_view text, AttrType type) {
  std::string literal(text);
  std::replace(literal.begin(), literal.end(), '\'', '"');
  WEFT_ASSIGN_OR_RETURN(config::Value v, config::ParseLiteral(literal));
  using K = config::Value::Kind;
  switch (type) {
    case AttrType::kInt:
      if (v.kind == K::kInt) return AttrValue(v.i);
      break;
    case AttrType::kFloat:
      if (v.kind == K::kFloat || v.kind == K::kInt)
        return AttrValue(v.kind == K::kInt ? static_cast<double>(v.i) : v.f);
      break;
    case AttrType::kBool:
      if (v.kind == K::kBool) return AttrValue(v.b);
      break;
    case AttrType::kString:
      if (v.kind == K::kString) return AttrValue(v.s);
      break;
    case AttrType::kType:
      if (v.kind == K::kString) {
        if (auto d = ParseDType(v.s)) return AttrValue(*d);
      }
      break;
    case AttrType::kIntList:
      if (v.kind == K::kArray) {
        std::vector<int64_t> out;
        for (const auto& e : v.elements) {
          if (e.kind != K::kInt) return InvalidArgumentError("bad default ", text);
          out.push_back(e.i);
        }
        return AttrValue(out);
      }
      break;
    case AttrType::kFloatList:
      if (v.kind == K::kArray) {
        std::vector<double> out;
        for (const auto& e : v.elements) out.push_back(e.kind == K::kInt ? static_cast<double>(e.i) : e.f);
        return AttrValue(out);
      }
      break;
    case AttrType::kStringList:
      if (v.kind == K::kArray) {
        std::vector<std::string> out;
        for (const auto& e : v.elements) out.push_back(e.s);
        return AttrValue(out);
      }
      break;
    case AttrType::kTypeList:
      if (v.kind == K::kArray && v.elements.empty()) return AttrValue(std::vector<DType>());
      break;
    case AttrType::kShapeList:
      if (v.kind == K::kArray && v.elements.empty()) return AttrValue(std::vector<Shape>());
      break;
    default: break;
  }
  return InvalidArgumentError("default ", Quote(text), " is not a ", AttrTypeName(type));
}

Expected<ArgDef> ParseArg(std::string_view spec) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return InvalidArgumentError("expected 'name: type'");
  ArgDef arg;
  arg.name = std::string(Trim(spec.substr(0, colon)));
  if (!IsIdentifier(arg.name)) return InvalidArgumentError("bad arg name ", Quote(arg.name));
  std::string_view type = Trim(spec.substr(colon + 1));
  if (const auto star = type.find('*'); star != std::string_view::npos) {
    arg.number_attr = std::string(Trim(type.substr(0, star)));
    type = Trim(type.substr(star + 1));
  }
  if (auto fixed = ParseDType(type); fixed && std::islower(static_cast<unsigned char>(type[0]))) {
    arg.fixed_type = *fixed;
  } else if (IsIdentifier(type)) {
    arg.type_attr = std::string(type);
  } else {
    return InvalidArgumentError("bad arg type ", Quote(type));
  }
  return arg;
}

Expected<AttrDef> ParseAttr(std::string_view spec) {
  const auto colon = spec.find(':');
  if (colon == std::string_view::npos) return InvalidArgumentError("expected 'name: type'");
  AttrDef attr;
  attr.name = std::string(Trim(spec.substr(0, colon)));
  if (!IsIdentifier(attr.name)) return InvalidArgumentError("bad attr name ", Quote(attr.name));
  std::string_view rest = Trim(spec.substr(colon + 1));
  std::string_view default_text;
  // The default follows '=' (but not the '=' of '>=').
  for (std::size_t i = 0; i < rest.size(); ++i) {
    if (rest[i] == '=' && (i == 0 || rest[i - 1] != '>')) {
      default_text = Trim(rest.substr(i + 1));
      rest = Trim(rest.substr(0, i));
      break;
    }
  }
  if (!rest.empty() && rest.front() == '{') {
    if (rest.find('\'') != std::string_view::npos || rest.find('"') != std::string_view::npos) {
      attr.type = AttrType::kString;
      std::string_view inner = rest.substr(1, rest.size() - 2);
      while (!inner.empty()) {
        const auto comma = inner.find(',');
        std::string_view item = Trim(inner.substr(0, comma));
        if (item.size() < 2) return InvalidArgumentError("bad string set ", Quote(rest));
        attr.allowed_strings.emplace_back(item.substr(1, item.size() - 2));
        if (comma == std::string_view::npos) break;
        inner = inner.substr(comma + 1);
      }
    } else {
      attr.type = AttrType::kType;
      WEFT_ASSIGN_OR_RETURN(attr.allowed_types, ParseDTypeSet(rest));
    }
  } else if (const auto ge = rest.find(">="); ge != std::string_view::npos) {
    const auto type = ParseAttrType(Trim(rest.substr(0, ge)));
    if (!type || *type != AttrType::kInt) return InvalidArgumentError("'>=' applies to int attrs only");
    attr.type = AttrType::kInt;
    attr.minimum = std::stoll(std::string(Trim(rest.substr(ge + 2))));
  } else {
    const auto type = ParseAttrType(rest);
    if (!type) return InvalidArgumentError("unknown attr type ", Quote(rest));
    attr.type = *type;
  }
  if (!default_text.empty()) {
    WEFT_ASSIGN_OR_RETURN(AttrValue value, ParseDefault(default_text, attr.type));
    attr.default_value = std::move(value);
  }
  return attr;
}

std::string DTypeSetText(const std::vector<DType>& types) {
  std::vector<std::string> names;
  for (DType d : types) names.emplace_back(DTypeName(d));
  return StrCat("{", StrJoin(names, ", "), "}");
}

}  // namespace

Expected<std::vector<DType>> ParseDTypeSet(std::string_view spec) {
  spec = Trim(spec);
  if (spec.size() < 2 || spec.front() != '{' || spec.back() != '}') {
    return InvalidArgumentError("bad dtype set ", Quote(spec));
  }
  std::vector<DType> out;
  std::string_view inner = spec.substr(1, spec.size() - 2);
  while (true) {
    const auto comma = inner.find(',');
    const std::string_view item = Trim(inner.substr(0, comma));
    const std::vector<DType>& named = Named(item);
    if (!named.empty()) {
      out.insert(out.end(), named.begin(), named.end());
    } else if (auto d = ParseDType(item)) {
      out.push_back(*d);
    } else {
      return InvalidArgumentError("unknown dtype ", Quote(item), " in ", Quote(spec));
    }
    if (comma == std::string_view::npos) break;
    inner = inner.substr(comma + 1);
  }
  return out;
}

std::string ArgDef::ToString() const {
  if (!type_list_attr.empty()) return StrCat(name, ": ", type_list_attr);
  std::string type = fixed_type != DType::kInvalid ? std::string(DTypeName(fixed_type)) : type_attr;
  return is_list() ? StrCat(name, ": ", number_attr, " * ", type) : StrCat(name, ": ", type);
}

std::string AttrDef::ToString() const {
  std::string out = StrCat(name, ": ");
  if (type == AttrType::kType && !allowed_types.empty()) {
    out += DTypeSetText(allowed_types);
  } else if (type == AttrType::kString && !allowed_strings.empty()) {
    std::vector<std::string> quoted;
    for (const auto& s : allowed_strings) quoted.push_back(StrCat("'", s, "'"));
    out += StrCat("{", StrJoin(quoted, ", "), "}");
  } else {
    out += AttrTypeName(type);
  }
  if (minimum) out += StrCat(" >= ", *minimum);
  if (default_value) out += StrCat(" = ", default_value->ToString());
  return out;
}

const AttrDef* OpDef::FindAttr(std::string_view attr) const {
  for (const AttrDef& a : attrs) {
    if (a.name == attr) return &a;
  }
  return nullptr;
}

std::string OpDef::Signature() const {
  std::vector<std::string> ins, outs, attr_texts;
  for (const ArgDef& a : inputs) ins.push_back(a.ToString());
  for (const ArgDef& a : outputs) outs.push_back(a.ToString());
  for (const AttrDef& a : attrs) attr_texts.push_back(a.ToString());
  std::string out = StrCat(name, "(", StrJoin(ins, ", "), ") -> (", StrJoin(outs, ", "), ")");
  if (!attr_texts.empty()) out += StrCat(" with ", StrJoin(attr_texts, ", "));
  return out;
}

OpDefBuilder::OpDefBuilder(std::string name) { def_.name = std::move(name); }
OpDefBuilder& OpDefBuilder::Input(std::string_view spec) {
  input_specs_.emplace_back(spec);
  return *this;
}
OpDefBuilder& OpDefBuilder::Output(std::string_view spec) {
  output_specs_.emplace_back(spec);
  return *this;
}
OpDefBuilder& OpDefBuilder::Attr(std::string_view spec) {
  attr_specs_.emplace_back(spec);
  return *this;
}
OpDefBuilder& OpDefBuilder::Stateful() {
  def_.stateful = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::Shape(ShapeFn fn) {
  def_.shape_fn = std::move(fn);
  return *this;
}
OpDefBuilder& OpDefBuilder::Doc(std::string doc) {
  def_.doc = std::move(doc);
  return *this;
}

Expected<OpDef> OpDefBuilder::Build() const {
  OpDef def = def_;
  auto context = [&](const std::string& spec) { return StrCat("op ", def.name, ": ", Quote(spec)); };
  for (const std::string& spec : input_specs_) {
    auto arg = ParseArg(spec);
    if (!arg.ok()) return arg.status().WithContext(context(spec));
    def.inputs.push_back(*arg);
  }
  for (const std::string& spec : output_specs_) {
    auto arg = ParseArg(spec);
    if (!arg.ok()) return arg.status().WithContext(context(spec));
    def.outputs.push_back(*arg);
  }
  for (const std::string& spec : attr_specs_) {
    auto attr = ParseAttr(spec);
    if (!attr.ok()) return attr.status().WithContext(context(spec));
    def.attrs.push_back(*attr);
  }
  // An arg typed by a list(type) attr is a list of one tensor per listed dtype.
  for (auto* args : {&def.inputs, &def.outputs}) {
    for (ArgDef& arg : *args) {
      const AttrDef* a = arg.type_attr.empty() ? nullptr : def.FindAttr(arg.type_attr);
      if (a == nullptr || a->type != AttrType::kTypeList) continue;
      if (!arg.number_attr.empty()) {
        return InvalidArgumentError("op ", def.name, ": arg '", arg.name, "' has both a number attr and the ",
                                    "list(type) attr '", arg.type_attr, "'");
      }
      arg.type_list_attr = std::exchange(arg.type_attr, std::string());
    }
  }
  // Every type and number attr an arg names must be declared.
  for (const auto* args : {&def.inputs, &def.outputs}) {
    for (const ArgDef& arg : *args) {
      if (!arg.type_attr.empty()) {
        const AttrDef* a = def.FindAttr(arg.type_attr);
        if (a == nullptr || a->type != AttrType::kType) {
          return InvalidArgumentError("op ", def.name, ": arg '", arg.name, "' uses type attr '", arg.type_attr,
                                      "', which is not declared as a type");
        }
      }
      if (!arg.number_attr.empty()) {
        const AttrDef* a = def.FindAttr(arg.number_attr);
        if (a == nullptr || a->type != AttrType::kInt) {
          return InvalidArgumentError("op ", def.name, ": arg '", arg.name, "' uses number attr '", arg.number_attr,
                                      "', which is not declared as an int");
        }
      }
    }
  }
  if (!def.shape_fn) return InvalidArgumentError("op ", def.name, " has no shape function");
  if (def.doc.empty()) return InvalidArgumentError("op ", def.name, " has no documentation");
  return def;
}

Status OpRegistry::Register(const OpDefBuilder& builder) {
  WEFT_ASSIGN_OR_RETURN(OpDef def, builder.Build());
  if (ops_.count(def.name) != 0) return AlreadyExistsError("op ", def.name, " is registered twice");
  std::string name = def.name;
  ops_.emplace(std::move(name), std::make_unique<OpDef>(std::move(def)));
  return Status();
}

const OpDef* OpRegistry::Find(std::string_view name) const {
  auto it = ops_.find(std::string(name));
  return it == ops_.end() ? nullptr : it->second.get();
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> all;
  for (const auto& [name, def] : ops_) all.push_back(def.get());
  std::sort(all.begin(), all.end(), [](const OpDef* a, const OpDef* b) { return a->name < b->name; });
  return all;
}

}  // namespace weft
