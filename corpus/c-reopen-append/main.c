/* Mistake: a log of 100,000 records is written by a helper that opens the
 * file with O_APPEND, writes one record and closes it again, for every
 * record: each record costs an open (path lookup, permission check) and a
 * close besides its write.
 * Fix: open the log once, write every record to the open descriptor, close
 * it at the end.  The file written is the same in both modes.
 * Usage: prog mistake|fixed   (writes events.log) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define RECORDS 100000

static void write_record(int fd, const char *line, size_t n)
{
    if (write(fd, line, n) != (ssize_t)n) {
        perror("write");
        exit(1);
    }
}

static int open_log(void)
{
    int fd = open("events.log", O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) {
        perror("events.log");
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    unlink("events.log");
    int fd = mistake ? -1 : open_log();
    char line[128];
    double energy = 1.0;
    for (int i = 0; i < RECORDS; i++) {
        energy *= 0.99999;
        int n = snprintf(line, sizeof line, "step %d energy %.12f\n", i, energy);
        if (mistake) {
            fd = open_log();
            write_record(fd, line, (size_t)n);
            close(fd);
        } else {
            write_record(fd, line, (size_t)n);
        }
    }
    if (!mistake)
        close(fd);
    printf("logged %d records\n", RECORDS);
    return 0;
}
