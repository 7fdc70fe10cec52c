/* stream.c -- kern_copy_stream: SSE2's 16-byte non-temporal stores (every x86-64 has them). */
#include "kernels/stream.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#include <emmintrin.h>

void kern_copy_stream(void *dst, const void *src, size_t bytes) {
  unsigned char *d = (unsigned char *)dst;
  const unsigned char *s = (const unsigned char *)src;
  /* Plain stores up to the first 16-byte boundary of dst: the streaming store needs it. */
  size_t head = (size_t)(-(uintptr_t)d & 15);
  if (head > bytes) head = bytes;
  memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(s + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(s + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(s + i + 32));
    __m128i e = _mm_loadu_si128((const __m128i *)(s + i + 48));
    _mm_stream_si128((__m128i *)(d + i), a);
    _mm_stream_si128((__m128i *)(d + i + 16), b);
    _mm_stream_si128((__m128i *)(d + i + 32), c);
    _mm_stream_si128((__m128i *)(d + i + 48), e);
  }
  for (; i + 16 <= bytes; i += 16)
    _mm_stream_si128((__m128i *)(d + i), _mm_loadu_si128((const __m128i *)(s + i)));
  memcpy(d + i, s + i, bytes - i);
  _mm_sfence();
}

#else

void kern_copy_stream(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); }

#endif
