/* Sanitizer self-test: the runtime's sources are linked into this program,
 * so its own calls go through the wrappers while ASan/UBSan watch.  Several
 * threads hammer one file and the record buffers fill and flush repeatedly. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char target[4200];

static void *hammer(void *arg) {
    long id = (long)arg;
    char buf[128];
    memset(buf, 'a' + (int)id, sizeof buf);
    int fd = open(target, O_WRONLY);
    for (int i = 0; i < 500; i++)
        if (pwrite(fd, buf, sizeof buf, (off_t)(id * 500 + i) * 128) != 128) return (void *)1;
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    snprintf(target, sizeof target, "%s/selftest.dat", argv[1]);
    int fd = open(target, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    close(fd);
    pthread_t t[4];
    for (long i = 0; i < 4; i++) pthread_create(&t[i], NULL, hammer, (void *)i);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        if (r) return 1;
    }
    FILE *f = fopen(target, "r");
    char line[64];
    size_t n = fread(line, 1, sizeof line, f);
    fclose(f);
    return n == sizeof line ? 0 : 3;
}
