/* What the trace's "cpu" part and the background threads' placement are
 * checked against: ``cpu_probe DIR [burn] [engine]`` writes DIR/data with
 * one write one byte short of 64 KiB and one of 64 KiB (with write-behind
 * on, through its thread; with ``engine``, one more of 64 KiB through an
 * event set), with ``many`` 4,000 more of 64 KiB over the first (page
 * cache copies of a few microseconds, too quick to measure each), with
 * ``sync`` an fsync of the file after the writes, burns
 * about 0.2 s of CPU with ``burn``, and prints each of
 * its threads' name and CPUs ("comm<TAB>cpus", from /proc) while they all
 * still run. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../include/iopilot_async.h"

static void show_threads(void) {
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[64] = "", line[256], cpus[200] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
        if (f) fclose(f);
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "Cpus_allowed_list:", 18)) sscanf(line + 18, "%199s", cpus);
        if (f) fclose(f);
        printf("%s\t%s\n", comm, cpus);
    }
    if (d) closedir(d);
}

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    int burn = 0, engine = 0, many = 0, sync = 0;
    for (int i = 2; i < argc; i++) {
        burn |= !strcmp(argv[i], "burn");
        many |= !strcmp(argv[i], "many");
        engine |= !strcmp(argv[i], "engine");
        sync |= !strcmp(argv[i], "sync");
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    static char buf[1 << 16];
    memset(buf, 'x', sizeof buf);
    if (fd < 0 || write(fd, buf, sizeof buf - 1) != (ssize_t)sizeof buf - 1 ||
        write(fd, buf, sizeof buf) != (ssize_t)sizeof buf)
        return 1;
    for (int i = 0; many && i < 4000; i++)
        if (pwrite(fd, buf, sizeof buf, 0) != (ssize_t)sizeof buf) return 1;
    iopilot_es *es = NULL;
    if (engine) {
        es = iopilot_es_create();
        if (!es || !iopilot_es_write(es, fd, buf, sizeof buf, 2 * sizeof buf, 0) ||
            iopilot_es_wait(es, -1, NULL, NULL, NULL) != 0)
            return 1;
    }
    if (sync && fsync(fd) != 0) return 1;
    if (burn) {
        volatile double x = 0;
        for (double t0 = cpu_seconds(); cpu_seconds() - t0 < 0.2;)
            for (int i = 0; i < 100000; i++) x += i * 0.5;
    }
    show_threads();
    if (es && iopilot_es_close(es) != 0) return 1;
    return close(fd) == 0 ? 0 : 1;
}
