/* NVDEC: the driver's decode library (libnvcuvid) loads, with everything it links, and exports the
 * decoder's entry points. Asking for codecs needs a CUDA context; loading is what the container's
 * files decide.
 *   NVDEC OK     exit 0
 *   NVDEC FAIL <reason>   exit 1: no libnvcuvid (no video capability), a library it links missing */
#include "probe.h"

#define CHECK "NVDEC"
#define SONAME "libnvcuvid.so.1"

int main(void) {
    void *library = open_library(CHECK, SONAME);
    symbol(CHECK, library, SONAME, "cuvidGetDecoderCaps");
    symbol(CHECK, library, SONAME, "cuvidCreateDecoder");
    printf("%s OK\n", CHECK);
    return 0;
}
