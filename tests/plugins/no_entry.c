/* A perfectly good shared library that is not a Weft plugin. */
__attribute__((visibility("default"))) int frobnicate(int x);
int frobnicate(int x) { return x + 1; }
