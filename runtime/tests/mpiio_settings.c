/* Prints what MPI_File_get_info reports for a file opened with
 * MPI_INFO_NULL and for one opened with the program's own info, and
 * whether the program's info object is unchanged after the open.
 *
 *     mpiio_settings DIR KEY...    (rank 0 prints "KEY=VALUE" or "KEY unset")
 */
#include <mpi.h>
#include <stdio.h>
#include <string.h>

static void show(MPI_File fh, const char *what, int argc, char **argv) {
    MPI_Info used;
    MPI_File_get_info(fh, &used);
    for (int i = 2; i < argc; i++) {
        char v[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        MPI_Info_get(used, argv[i], MPI_MAX_INFO_VAL, v, &flag);
        if (flag) printf("%s %s=%s\n", what, argv[i], v);
        else printf("%s %s unset\n", what, argv[i]);
    }
    MPI_Info_free(&used);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[4096];
    MPI_File fh;

    snprintf(path, sizeof path, "%s/null-info.dat", argc > 1 ? argv[1] : ".");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh);
    int x = rank;
    MPI_File_write_at_all(fh, rank * (MPI_Offset)sizeof x, &x, 1, MPI_INT, MPI_STATUS_IGNORE);
    if (rank == 0) show(fh, "null-info", argc, argv);
    MPI_File_close(&fh);

    MPI_Info mine;
    MPI_Info_create(&mine);
    MPI_Info_set(mine, "access_style", "write_once");
    snprintf(path, sizeof path, "%s/own-info.h5", argc > 1 ? argv[1] : ".");
    MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, mine, &fh);
    if (rank == 0) show(fh, "own-info", argc, argv);
    MPI_File_close(&fh);
    int nkeys = 0, flag = 0;
    char v[MPI_MAX_INFO_VAL + 1] = "";
    MPI_Info_get_nkeys(mine, &nkeys);
    MPI_Info_get(mine, "access_style", MPI_MAX_INFO_VAL, v, &flag);
    if (rank == 0)
        printf("caller info: %d key(s), access_style=%s -> %s\n", nkeys, flag ? v : "(unset)",
               nkeys == 1 && flag && !strcmp(v, "write_once") ? "unchanged" : "CHANGED");
    MPI_Info_free(&mine);
    MPI_Finalize();
    return 0;
}
