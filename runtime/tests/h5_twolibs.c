/* Two copies of HDF5 in one process, for the iopilot runtime.
 *
 *   h5_twolibs PLUGIN.so PATH_A PATH_B
 *
 * The program is linked with one HDF5 (Debian's parallel libhdf5_openmpi,
 * `h5pcc -shlib`); PLUGIN.so is h5_twolibs_plugin.c linked with another
 * (libhdf5_serial.so.103) and loaded with RTLD_LOCAL, the way Python loads
 * h5py or netCDF4 with their bundled libraries.  With both open at once the
 * program writes PATH_A:/a (1000 doubles, one write) and the plugin writes
 * PATH_B:/b (2000 ints, two writes) and reads it back.  A preloaded
 * wrapper must send every call to the copy its caller is bound to: calls
 * routed to the wrong copy fail (the ids of one copy mean nothing to the
 * other).  Exits non-zero when a call fails or data differ.
 */
#include <dlfcn.h>
#include <hdf5.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PLUGIN.so PATH_A PATH_B\n", argv[0]);
        return 2;
    }
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "h5_twolibs: %s\n", dlerror());
        return 2;
    }
    int (*plugin_open)(const char *) = (int (*)(const char *))dlsym(h, "plugin_open");
    int (*plugin_finish)(void) = (int (*)(void))dlsym(h, "plugin_finish");
    if (!plugin_open || !plugin_finish) return 2;

    hsize_t n = 1000;
    hid_t file = H5Fcreate(argv[2], H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(1, &n, NULL);
    hid_t d = H5Dcreate2(file, "a", H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    if (file < 0 || d < 0) return 1;
    if (plugin_open(argv[3]) != 0) return 1; /* the other copy's ids are now live too */
    double buf[1000], got[1000];
    for (int i = 0; i < 1000; i++) buf[i] = i * 0.25;
    if (H5Dwrite(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) return 1;
    if (plugin_finish() != 0) return 1;
    if (H5Dread(d, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, got) < 0) return 1;
    for (int i = 0; i < 1000; i++)
        if (got[i] != buf[i]) return 1;
    H5Dclose(d);
    H5Sclose(space);
    if (H5Fclose(file) < 0) return 1;
    printf("ok\n");
    return 0;
}
