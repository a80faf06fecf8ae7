/* Part of libiopilot_link.a only: the runtime linked into a program.
 *
 * The program exports this symbol (the link options name it in the dynamic
 * list): a copy of libiopilot.so preloaded into the same process finds it
 * and stands aside, so that nothing is traced twice, and iopilot's ELF
 * reader knows the program carries the runtime.  ``-u`` of it on the link
 * line also brings the runtime's object out of the archive. */
__attribute__((visibility("default"), used)) const char iopilot_linked_runtime[] =
    "iopilot runtime, linked in";
