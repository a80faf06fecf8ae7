/* The operations behind_property.c draws and runs: their kinds, how often
 * each is drawn, and a sequence of them (see behind_property.c). */
#ifndef BEHIND_PROPERTY_H
#define BEHIND_PROPERTY_H

#include <stdint.h>

enum {
    K_OPEN, K_WRITE, K_PWRITE, K_LSEEK, K_FTRUNCATE, K_STAT, K_STATX, K_FSTAT, K_LINK,
    K_RENAME, K_UNLINK, K_DUP, K_DUP2, K_READ, K_PREAD, K_FSYNC, K_CLOSE, K_SETFL, K_FSIZE,
    K_EFAULT, K_FORK, K_PIPE, K_THREADS, K_KILL, NKINDS
};
static const char *kind_name[NKINDS] = {
    "open", "write", "pwrite", "lseek", "ftruncate", "stat", "statx", "fstat", "link",
    "rename", "unlink", "dup", "dup2", "read", "pread", "fsync", "close", "setfl", "fsize",
    "efault", "fork", "pipe", "threads", "kill"};
/* How often each kind is drawn for a sequence's own operations. */
static const int weight[NKINDS] = {
    [K_OPEN] = 24, [K_WRITE] = 36, [K_PWRITE] = 28, [K_LSEEK] = 16, [K_FTRUNCATE] = 8,
    [K_STAT] = 8, [K_STATX] = 4, [K_FSTAT] = 10, [K_LINK] = 6, [K_RENAME] = 6, [K_UNLINK] = 6,
    [K_DUP] = 6, [K_DUP2] = 6, [K_READ] = 10, [K_PREAD] = 10, [K_FSYNC] = 2, [K_CLOSE] = 10,
    [K_SETFL] = 2, [K_FSIZE] = 2, [K_EFAULT] = 1, [K_FORK] = 1, [K_PIPE] = 1, [K_THREADS] = 2};

#define NSLOTS 4
#define NNAMES 4
#define MAXOPS 24
#define MAXSUB 16
#define MAXLEN 70000 /* above a 64 KiB write-behind buffer */
#define REGION 131072 /* each thread's part of the file */

typedef struct {
    int kind, slot, slot2, name, name2, whence, flags, thread;
    int64_t off, lim;
    uint32_t len, pat;
} sop;

typedef struct {
    sop o;
    int nsub;
    sop sub[MAXSUB];
    int dropped;
    int sub_dropped[MAXSUB];
} op;

typedef struct {
    int n;
    op ops[MAXOPS];
} seq;

#endif
