// C++ fstreams: libstdc++ opens with fopen, then reads and writes with
// read() and write() on fileno(); fclose closes the descriptor.
// Usage: stream_fds_cpp DIR; in.dat is written, then read whole three
// times; out.txt written by line (std::endl), closed, reopened and
// written again; log.txt written, then appended to.
#include <fstream>
#include <string>
#include <vector>

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    std::string dir = argv[1];
    std::vector<char> buf(1 << 20, 'x');
    {
        std::ofstream o(dir + "/in.dat", std::ios::binary);
        o.write(buf.data(), buf.size());
    }
    for (int step = 0; step < 3; step++) {
        std::ifstream f(dir + "/in.dat", std::ios::binary);
        f.read(buf.data(), buf.size());
        if (f.gcount() != (std::streamsize)buf.size()) return 3;
    }
    for (int round = 0; round < 2; round++) {
        std::ofstream o(dir + "/out.txt");
        for (int i = 0; i < 10; i++) o << "line " << i << std::endl;
    }
    for (int round = 0; round < 2; round++) {
        std::ofstream o(dir + "/log.txt", round ? std::ios::app : std::ios::out);
        for (int i = 0; i < 10; i++) o << "more " << i << std::endl;
    }
    return 0;
}
