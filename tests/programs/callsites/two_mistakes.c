/* Two I/O mistakes on known lines, for the call-site tests: each line marked
 * "MISTAKE: <check> in <function>" is the call the finding of that check is about.
 *   1. put_value() writes one 8-byte value per write() call, 20,000 times;
 *   2. main() fsyncs the step file after each of 40 steps.
 * Usage: prog   (writes values.dat and steps.dat in the current directory) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define VALUES 20000
#define STEPS 40
#define STEP_BYTES (64 * 1024)

__attribute__((noinline)) static void put_value(int fd, double v)
{
    if (write(fd, &v, sizeof v) != (ssize_t)sizeof v) { /* MISTAKE: posix-small-writes in put_value */
        perror("write");
        exit(1);
    }
}

int main(void)
{
    int fd = open("values.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int steps = open("steps.dat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || steps < 0) {
        perror("open");
        return 1;
    }
    for (int i = 0; i < VALUES; i++)
        put_value(fd, 1e-3 * i);
    static char block[STEP_BYTES];
    for (int s = 0; s < STEPS; s++) {
        memset(block, 'a' + s % 26, sizeof block);
        if (write(steps, block, sizeof block) != (ssize_t)sizeof block) {
            perror("write");
            return 1;
        }
        if (fsync(steps) != 0) { /* MISTAKE: flush-per-step in main */
            perror("fsync");
            return 1;
        }
    }
    close(fd);
    close(steps);
    return 0;
}
