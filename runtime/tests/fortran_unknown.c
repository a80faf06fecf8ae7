/* The FORTRAN layer with a library that is not libgfortran.so.5.
 *
 * Built twice: with -DFAKE_LIBRARY into libfakefortran.so, a stand-in that
 * defines the libgfortran entry points as no-ops; without it into a program
 * linked with that library, which makes the calls of
 *
 *     open(7, file='ignored.dat')
 *     write(7) x, array
 *     close(7)
 *
 * with parameter blocks holding nothing readable after their common part
 * (the file name pointer and the array descriptor point to unmapped memory).
 * Traced, the runtime must not read past the common part: the statement is
 * counted on "<Fortran unit 7>" and the array in ARRAYS_UNSIZED. */
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t flags, unit;
    const char *filename;
    int32_t line;
    char rest[512]; /* whatever a library of another layout would hold */
} block;

#ifdef FAKE_LIBRARY
void _gfortran_st_open(block *b) { (void)b; }
void _gfortran_st_close(block *b) { (void)b; }
void _gfortran_st_write(block *b) { (void)b; }
void _gfortran_st_write_done(block *b) { (void)b; }
void _gfortran_transfer_real_write(block *b, void *p, int kind) { (void)b, (void)p, (void)kind; }
void _gfortran_transfer_array_write(block *b, void *d, int kind, size_t len) {
    (void)b, (void)d, (void)kind, (void)len;
}
#else
void _gfortran_st_open(block *b);
void _gfortran_st_close(block *b);
void _gfortran_st_write(block *b);
void _gfortran_st_write_done(block *b);
void _gfortran_transfer_real_write(block *b, void *p, int kind);
void _gfortran_transfer_array_write(block *b, void *d, int kind, size_t len);

int main(void) {
    void *unmapped = (void *)(uintptr_t)0x10; /* any read of it faults */
    block b;
    memset(&b, 0xff, sizeof b);              /* lengths and pointers: garbage */
    for (size_t at = 48; at + sizeof unmapped <= sizeof b.rest; at += sizeof unmapped)
        memcpy(b.rest + at - 24, &unmapped, sizeof unmapped);
    b.unit = 7;
    b.filename = "unknown.f90";
    b.line = 3;
    b.flags = 1 << 8;                /* FILE=, as .so.5 numbers it */
    _gfortran_st_open(&b);
    b.flags = 0;                     /* unformatted WRITE */
    double x = 1.0;
    _gfortran_st_write(&b);
    _gfortran_transfer_real_write(&b, &x, 8);
    _gfortran_transfer_array_write(&b, unmapped, 8, 0);
    _gfortran_st_write_done(&b);
    b.flags = 0;
    _gfortran_st_close(&b);
    return 0;
}
#endif
