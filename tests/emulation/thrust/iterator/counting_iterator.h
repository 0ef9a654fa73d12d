#pragma once
namespace thrust { template <class T> struct counting_iterator { T b; counting_iterator(T v) : b(v) {} T operator[](long long i) const { return b + (T)i; } }; }
