/* NVENC: the driver's encode library answers the highest NVENC API version it supports.
 *   NVENC OK api <major>.<minor>   exit 0
 *   NVENC FAIL <reason>            exit 1: no libnvidia-encode (no video capability), an error status
 * NvEncodeAPIGetMaxSupportedVersion packs the version as (major << 4) | minor. */
#include <stdint.h>

#include "probe.h"

#define CHECK "NVENC"
#define SONAME "libnvidia-encode.so.1"

typedef int NVENCSTATUS; /* NV_ENC_SUCCESS = 0 */
typedef NVENCSTATUS (*PFN_NvEncodeAPIGetMaxSupportedVersion)(uint32_t *);

int main(void) {
    void *library = open_library(CHECK, SONAME);
    PFN_NvEncodeAPIGetMaxSupportedVersion max_version = (PFN_NvEncodeAPIGetMaxSupportedVersion)symbol(
        CHECK, library, SONAME, "NvEncodeAPIGetMaxSupportedVersion");
    uint32_t version = 0;
    NVENCSTATUS status = max_version(&version);
    if (status != 0) {
        fail(CHECK, "NvEncodeAPIGetMaxSupportedVersion returned status %d", status);
    }
    printf("%s OK api %u.%u\n", CHECK, version >> 4, version & 0xFu);
    return 0;
}
