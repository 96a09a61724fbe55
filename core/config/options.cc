#include "core/config/options.h"

#include <cmath>

namespace weft::config {

std::string_view OptionTypeName(OptionType type) {
  switch (type) {
    case OptionType::kBool: return "a boolean";
    case OptionType::kInt: return "an integer";
    case OptionType::kFloat: return "a number";
    case OptionType::kString: return "a string";
    case OptionType::kStringList: return "an array of strings";
    case OptionType::kIntList: return "an array of integers";
  }
  return "a value";
}

namespace {

std::string FormatBound(double bound, OptionType type) {
  if (type == OptionType::kInt) return StrCat(static_cast<int64_t>(bound));
  return StrCat(bound);
}

bool TypeMatches(const Value& value, OptionType type) {
  switch (type) {
    case OptionType::kBool: return value.kind == Value::Kind::kBool;
    case OptionType::kInt: return value.kind == Value::Kind::kInt;
    case OptionType::kFloat: return value.kind == Value::Kind::kFloat || value.kind == Value::Kind::kInt;
    case OptionType::kString: return value.kind == Value::Kind::kString;
    case OptionType::kStringList:
      if (value.kind != Value::Kind::kArray) return false;
      for (const Value& element : value.elements) {
        if (element.kind != Value::Kind::kString) return false;
      }
      return true;
    case OptionType::kIntList:
      if (value.kind != Value::Kind::kArray) return false;
      for (const Value& element : value.elements) {
        if (element.kind != Value::Kind::kInt) return false;
      }
      return true;
  }
  return false;
}

bool InBounds(const Value& value, const OptionSpec& spec) {
  if (spec.type == OptionType::kString && !spec.choices.empty()) {
    for (const std::string& choice : spec.choices) {
      if (value.s == choice) return true;
    }
    return false;
  }
  if (spec.type != OptionType::kInt && spec.type != OptionType::kFloat) return true;
  const double number = value.kind == Value::Kind::kInt ? static_cast<double>(value.i) : value.f;
  if (std::isnan(number)) return false;
  if (spec.min && number < *spec.min) return false;
  if (spec.max && number > *spec.max) return false;
  return true;
}

}  // namespace

bool ValueFits(const Value& value, const OptionSpec& spec) {
  return TypeMatches(value, spec.type) && InBounds(value, spec);
}

std::string DescribeExpected(const OptionSpec& spec) {
  if (spec.type == OptionType::kString && !spec.choices.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& choice : spec.choices) quoted.push_back(Quote(choice));
    return StrCat("one of ", StrJoin(quoted, ", "));
  }
  std::string out(OptionTypeName(spec.type));
  if (spec.min && spec.max) {
    out += StrCat(" in [", FormatBound(*spec.min, spec.type), ", ", FormatBound(*spec.max, spec.type), "]");
  } else if (spec.min) {
    out += StrCat(" >= ", FormatBound(*spec.min, spec.type));
  } else if (spec.max) {
    out += StrCat(" <= ", FormatBound(*spec.max, spec.type));
  }
  return out;
}

Expected<OptionValues> ValidateOptions(const Section* section, std::string_view section_path,
                                       const std::vector<OptionSpec>& specs) {
  OptionValues values;
  WEFT_RETURN_IF_ERROR(ErrorsToStatus(CheckOptions(section, section_path, specs, &values)));
  return values;
}

std::vector<ConfigError> CheckOptions(const Section* section, std::string_view section_path,
                                      const std::vector<OptionSpec>& specs, OptionValues* out) {
  std::vector<ConfigError> errors;
  std::map<std::string, Value> values;
  std::vector<std::string> known;
  for (const OptionSpec& spec : specs) known.push_back(spec.key);

  if (section != nullptr) {
    for (const auto& [key, value] : section->values) {
      const std::string path = StrCat(section_path, ".", key);
      const OptionSpec* spec = nullptr;
      for (const OptionSpec& candidate : specs) {
        if (candidate.key == key) spec = &candidate;
      }
      if (spec == nullptr) {
        std::string message = "unknown key";
        const std::string hint = ClosestMatch(key, known);
        if (!hint.empty()) {
          message += StrCat("; did you mean '", hint, "'?");
        } else if (known.empty()) {
          message += StrCat("; [", section_path, "] takes no keys");
        } else {
          message += StrCat("; known keys: ", StrJoin(known, ", "));
        }
        errors.push_back({value.key_pos, path, message});
        continue;
      }
      if (!ValueFits(value, *spec)) {
        errors.push_back({value.pos, path, StrCat("expected ", DescribeExpected(*spec), ", got ", value.text)});
        continue;
      }
      Value stored = value;
      if (spec->type == OptionType::kFloat && stored.kind == Value::Kind::kInt) {
        stored.kind = Value::Kind::kFloat;
        stored.f = static_cast<double>(stored.i);
      }
      values[key] = std::move(stored);
    }
  }
  if (!errors.empty() || out == nullptr) return errors;
  for (const OptionSpec& spec : specs) {
    if (values.count(spec.key) == 0 && spec.default_value) {
      Value value = *spec.default_value;
      value.pos = SourcePos{};
      value.key_pos = SourcePos{};
      values[spec.key] = std::move(value);
    }
  }
  *out = OptionValues(std::string(section_path), std::move(values));
  return errors;
}

Expected<const Value*> OptionValues::Find(std::string_view key, OptionType type) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) {
    return NotFoundError(section_path_, ".", key, ": not set and has no default");
  }
  if (!TypeMatches(it->second, type)) {
    return InvalidArgumentError(section_path_, ".", key, ": holds ", it->second.text, ", not ", OptionTypeName(type));
  }
  return &it->second;
}

Expected<bool> OptionValues::GetBool(std::string_view key) const {
  WEFT_ASSIGN_OR_RETURN(const Value* value, Find(key, OptionType::kBool));
  return value->b;
}

Expected<int64_t> OptionValues::GetInt(std::string_view key) const {
  WEFT_ASSIGN_OR_RETURN(const Value* value, Find(key, OptionType::kInt));
  return value->i;
}

Expected<double> OptionValues::GetFloat(std::string_view key) const {
  WEFT_ASSIGN_OR_RETURN(const Value* value, Find(key, OptionType::kFloat));
  return value->kind == Value::Kind::kInt ? static_cast<double>(value->i) : value->f;
}

Expected<const std::string*> OptionValues::GetString(std::string_view key) const {
  WEFT_ASSIGN_OR_RETURN(const Value* value, Find(key, OptionType::kString));
  return &value->s;
}

Expected<std::vector<std::string>> OptionValues::GetStringList(std::string_view key) const {
  WEFT_ASSIGN_OR_RETURN(const Value* value, Find(key, OptionType::kStringList));
  std::vector<std::string> out;
  for (const Value& element : value->elements) out.push_back(element.s);
  return out;
}

Expected<std::vector<int64_t>> OptionValues::GetIntList(std::string_view key) const {
  WEFT_ASSIGN_OR_RETURN(const Value* value, Find(key, OptionType::kIntList));
  std::vector<int64_t> out;
  for (const Value& element : value->elements) out.push_back(element.i);
  return out;
}

const SourcePos* OptionValues::PositionOf(std::string_view key) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end() || it->second.pos.line == 0) return nullptr;
  return &it->second.pos;
}

}  // namespace weft::config
