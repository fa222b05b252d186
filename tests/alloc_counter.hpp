// Replaces the global operator new to count every heap allocation in the test process (libglassbox
// and the modules included), for the "nothing allocates in the loop" tests. Include from exactly
// one file per test executable: it defines the replacement operators. Every form that a replaced
// operator delete may free is replaced too (the nothrow forms: std::stable_sort's temporary buffer
// takes one), so that no block reaches the sanitizer's delete from its own new, or the other way round.
#pragma once
#include <atomic>
#include <cstdlib>
#include <new>

inline std::atomic<long> g_allocs{0};

void* operator new(std::size_t n) {
  ++g_allocs;
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  ++g_allocs;
  return std::malloc(n ? n : 1);
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return operator new(n, std::nothrow); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
