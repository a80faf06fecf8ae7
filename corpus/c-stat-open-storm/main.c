/* Mistake: at every iteration of a solver loop the program stat()s a
 * "STOP" file (to let the user end the run early) and opens, reads and
 * closes its small parameter file again to pick up the time step.
 * 100,000 iterations make 100,000 stats and 100,000 open/read/close.
 * Fix: read the parameters once, and look for the STOP file only every
 * 1,000 iterations (still well under a second between checks).
 * The data written is the same in both modes.
 * Usage: prog mistake|fixed   (creates params.txt and result.dat) */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ITERS 100000
#define CHECK_EVERY 1000

static double read_dt(void)
{
    char buf[256];
    int fd = open("params.txt", O_RDONLY);
    if (fd < 0) {
        perror("params.txt");
        exit(1);
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    double dt = 0;
    sscanf(buf, "dt = %lf", &dt);
    return dt;
}

static int stop_requested(void)
{
    struct stat st;
    return stat("STOP", &st) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    FILE *f = fopen("params.txt", "w");
    fprintf(f, "dt = 0.001\nsteps = %d\n", ITERS);
    fclose(f);

    double x = 1.0, v = 0.0;
    double dt = read_dt();
    for (int it = 0; it < ITERS; it++) {
        if (mistake || it % CHECK_EVERY == 0)
            if (stop_requested())
                break;
        if (mistake)
            dt = read_dt();
        /* one step of a harmonic oscillator */
        v -= x * dt;
        x += v * dt;
    }
    f = fopen("result.dat", "w");
    fprintf(f, "%.17g %.17g\n", x, v);
    fclose(f);
    printf("x = %.6f v = %.6f\n", x, v);
    return 0;
}
