/* Whether the container's dynamic loader resolves a library by its soname: how a check shows a
 * capability's library absent (a compute-only claim has no libGLX_nvidia.so.0).
 *   LOADED <soname>                  exit 0
 *   NOT LOADED <soname>: <reason>    exit 1
 *   usage line                       exit 64 */
#include "probe.h"

int main(int argc, char **argv) {
    if (argc != 2) {
        printf("usage: dlopen_probe SONAME\n");
        return 64;
    }
    if (dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) == NULL) {
        printf("NOT LOADED %s: %s\n", argv[1], dlerror());
        return 1;
    }
    printf("LOADED %s\n", argv[1]);
    return 0;
}
