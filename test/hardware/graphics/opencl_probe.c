/* OpenCL through the ICD loader of the image (Debian's ocl-icd-libopencl1): the platforms the ICD
 * files name, the first NVIDIA one (else the first), its first device.
 *   OPENCL OK platform "<name>" device "<name>"   exit 0
 *   OPENCL FAIL <reason>                          exit 1: no loader, no ICD file (-1001), no device
 * The few OpenCL types and enums used are declared here with the values of cl.h. */
#include <stdint.h>
#include <string.h>

#include "probe.h"

#define CHECK "OPENCL"
#define SONAME "libOpenCL.so.1"

typedef int32_t cl_int;
typedef uint32_t cl_uint;
typedef uint64_t cl_bitfield;
typedef void *cl_platform_id;
typedef void *cl_device_id;

#define CL_PLATFORM_NOT_FOUND_KHR (-1001)
#define CL_PLATFORM_NAME 0x0902
#define CL_DEVICE_TYPE_ALL 0xFFFFFFFFu
#define CL_DEVICE_NAME 0x102B
#define MAX_PLATFORMS 16u

typedef cl_int (*PFN_clGetPlatformIDs)(cl_uint, cl_platform_id *, cl_uint *);
typedef cl_int (*PFN_clGetPlatformInfo)(cl_platform_id, cl_uint, size_t, void *, size_t *);
typedef cl_int (*PFN_clGetDeviceIDs)(cl_platform_id, cl_bitfield, cl_uint, cl_device_id *, cl_uint *);
typedef cl_int (*PFN_clGetDeviceInfo)(cl_device_id, cl_uint, size_t, void *, size_t *);

int main(void) {
    void *library = open_library(CHECK, SONAME);
    PFN_clGetPlatformIDs platform_ids = (PFN_clGetPlatformIDs)symbol(CHECK, library, SONAME, "clGetPlatformIDs");
    PFN_clGetPlatformInfo platform_info = (PFN_clGetPlatformInfo)symbol(CHECK, library, SONAME, "clGetPlatformInfo");
    PFN_clGetDeviceIDs device_ids = (PFN_clGetDeviceIDs)symbol(CHECK, library, SONAME, "clGetDeviceIDs");
    PFN_clGetDeviceInfo device_info = (PFN_clGetDeviceInfo)symbol(CHECK, library, SONAME, "clGetDeviceInfo");

    cl_platform_id platforms[MAX_PLATFORMS];
    cl_uint count = 0;
    cl_int status = platform_ids(MAX_PLATFORMS, platforms, &count);
    if (status == CL_PLATFORM_NOT_FOUND_KHR) {
        fail(CHECK, "clGetPlatformIDs %d (CL_PLATFORM_NOT_FOUND_KHR: no ICD file names a platform)", status);
    }
    if (status != 0 || count == 0) {
        fail(CHECK, "clGetPlatformIDs %d, %u platforms", status, count);
    }
    if (count > MAX_PLATFORMS) {
        count = MAX_PLATFORMS;
    }
    char platform_name[256] = "";
    cl_platform_id chosen = platforms[0];
    for (cl_uint i = 0; i < count; i++) {
        char name[256] = "";
        if (platform_info(platforms[i], CL_PLATFORM_NAME, sizeof name - 1, name, NULL) != 0) {
            continue;
        }
        if (i == 0 || strstr(name, "NVIDIA") != NULL) {
            chosen = platforms[i];
            memcpy(platform_name, name, sizeof name);
        }
        if (strstr(name, "NVIDIA") != NULL) {
            break;
        }
    }
    cl_device_id device = NULL;
    cl_uint devices = 0;
    status = device_ids(chosen, CL_DEVICE_TYPE_ALL, 1, &device, &devices);
    if (status != 0 || devices == 0) {
        fail(CHECK, "platform \"%s\" has no device (clGetDeviceIDs %d)", platform_name, status);
    }
    char device_name[256] = "";
    status = device_info(device, CL_DEVICE_NAME, sizeof device_name - 1, device_name, NULL);
    if (status != 0) {
        fail(CHECK, "clGetDeviceInfo(CL_DEVICE_NAME) %d", status);
    }
    printf("%s OK platform \"%s\" device \"%s\"\n", CHECK, platform_name, device_name);
    return 0;
}
