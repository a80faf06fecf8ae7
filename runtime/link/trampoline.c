/* Part of libiopilot_link.a only: the entry point ``__wrap_<name>``
 * of one wrapped library function (-DIOP_NAME=H5Dwrite), a jump into
 * its wrapper iop_wrapped_<name> (see IOP_WRAPPED in src/core.h): the
 * arguments and the return address stay the caller's.
 *
 * The archive holds one such member per wrapper, so the linker takes it only
 * when the program calls the function (ld --wrap turns the program's calls
 * of ``name`` into calls of ``__wrap_name``).  Its reference to
 * ``__real_name`` is then a strong one, which brings the real function out
 * of a static library (libhdf5.a); the wrappers themselves only refer to
 * the library weakly, so that a program without it links too. */
#define IOP_STR(x) #x
#define IOP_XSTR(x) IOP_STR(x)
#define NAME IOP_XSTR(IOP_NAME)

#if defined(__x86_64__) || defined(__i386__)
#define IOP_JUMP "jmp"
#elif defined(__aarch64__) || defined(__arm__)
#define IOP_JUMP "b"
#else
#error "no jump instruction known for this architecture"
#endif

__asm__(".text\n"
        ".globl __wrap_" NAME "\n"
        ".type __wrap_" NAME ", %function\n"
        "__wrap_" NAME ":\n"
        "\t" IOP_JUMP " iop_wrapped_" NAME "\n"
        ".size __wrap_" NAME ", . - __wrap_" NAME "\n");

#define IOP_CAT(a, b) a##b
#define IOP_REAL(n) IOP_CAT(__real_, n)
extern char IOP_REAL(IOP_NAME)[];
__attribute__((used)) static void *const real_reference = IOP_REAL(IOP_NAME);
