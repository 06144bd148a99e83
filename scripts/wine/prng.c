/* bcryptprimitives.dll for Wine 8.0, which lacks it: Rust's std on Windows imports
 * ProcessPrng from it, so every Rust binary fails to start under Wine 8.0 without this.
 * Built by scripts/wine-run with mingw-w64 and put in the Wine prefix's system32.
 * ProcessPrng fills the buffer with random bytes (here from RtlGenRandom) and returns TRUE. */
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036
BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len > 0) {
        ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!RtlGenRandom(data, n)) return FALSE;
        data += n; len -= n;
    }
    return TRUE;
}
