// The release of this build of Weft, and how it was built.
#ifndef WEFT_CORE_BASE_VERSION_H_
#define WEFT_CORE_BASE_VERSION_H_

namespace weft {

// "0.1.0"
extern const char* const kVersion;
// The git commit the build came from ("c0ffee1" or "unknown"), with
// "-dirty" when the tree had uncommitted changes.
extern const char* const kGitCommit;
// "Release", "Debug", ...
extern const char* const kBuildType;
// "GNU 12.2.0"
extern const char* const kCompiler;

}  // namespace weft

#endif  // WEFT_CORE_BASE_VERSION_H_
