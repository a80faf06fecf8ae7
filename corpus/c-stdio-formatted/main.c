/* Mistake: a 2 M-element array of doubles is saved as text, one
 * fprintf("%.17g\n") per element.  Formatting each double to 17 digits is
 * far slower than the disk, and the file is 2.5x larger than the data.
 * Fix: fwrite the array in binary, one call (the numbers are the same, bit
 * for bit; a reader uses fread instead of fscanf).
 * Usage: prog mistake|fixed   (writes array.txt or array.bin) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N (2 * 1024 * 1024)

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "mistake") && strcmp(argv[1], "fixed"))) {
        fprintf(stderr, "usage: %s mistake|fixed\n", argv[0]);
        return 2;
    }
    int mistake = !strcmp(argv[1], "mistake");
    double *a = malloc(sizeof(double) * N);
    for (size_t i = 0; i < N; i++)
        a[i] = 1.0 / (1.0 + (double)i);

    FILE *f = fopen(mistake ? "array.txt" : "array.bin", mistake ? "w" : "wb");
    if (!f) {
        perror("fopen");
        return 1;
    }
    if (mistake) {
        for (size_t i = 0; i < N; i++)
            fprintf(f, "%.17g\n", a[i]);
    } else if (fwrite(a, sizeof(double), N, f) != N) {
        perror("fwrite");
        return 1;
    }
    if (fclose(f) != 0) {
        perror("fclose");
        return 1;
    }
    free(a);
    printf("wrote %d doubles\n", N);
    return 0;
}
