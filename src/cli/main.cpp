#include <cstdio>
int main() { std::puts("hypic"); return 0; }
