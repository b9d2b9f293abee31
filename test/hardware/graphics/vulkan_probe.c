/* Vulkan through the loader of the image (Debian's libvulkan1): an instance, the physical devices,
 * the first NVIDIA one's properties (else the first's).
 *   VULKAN OK <deviceName> api <major>.<minor>.<patch>   exit 0
 *   VULKAN NO DEVICE                                     exit 2: an instance, but no device
 *   VULKAN FAIL <reason>                                 exit 1: no loader, no ICD (-9), ...
 * The few Vulkan types used are declared here with the layouts of vulkan_core.h. */
#include <stdint.h>
#include <string.h>

#include "probe.h"

#define CHECK "VULKAN"
#define SONAME "libvulkan.so.1"

typedef int32_t VkResult;
typedef void *VkInstance;
typedef void *VkPhysicalDevice;
typedef void (*PFN_vkVoidFunction)(void);

typedef struct {
    int32_t sType; /* VK_STRUCTURE_TYPE_APPLICATION_INFO = 0 */
    const void *pNext;
    const char *pApplicationName;
    uint32_t applicationVersion;
    const char *pEngineName;
    uint32_t engineVersion;
    uint32_t apiVersion;
} VkApplicationInfo;

typedef struct {
    int32_t sType; /* VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO = 1 */
    const void *pNext;
    uint32_t flags;
    const VkApplicationInfo *pApplicationInfo;
    uint32_t enabledLayerCount;
    const char *const *ppEnabledLayerNames;
    uint32_t enabledExtensionCount;
    const char *const *ppEnabledExtensionNames;
} VkInstanceCreateInfo;

typedef struct {
    uint32_t apiVersion;
    uint32_t driverVersion;
    uint32_t vendorID;
    uint32_t deviceID;
    int32_t deviceType;
    char deviceName[256];
    uint8_t pipelineCacheUUID[16];
    uint64_t limitsAndSparseProperties[256]; /* VkPhysicalDeviceLimits and sparse properties: 8-aligned, < 2 KiB */
} VkPhysicalDeviceProperties;

typedef PFN_vkVoidFunction (*PFN_vkGetInstanceProcAddr)(VkInstance, const char *);
typedef VkResult (*PFN_vkCreateInstance)(const VkInstanceCreateInfo *, const void *, VkInstance *);
typedef void (*PFN_vkDestroyInstance)(VkInstance, const void *);
typedef VkResult (*PFN_vkEnumeratePhysicalDevices)(VkInstance, uint32_t *, VkPhysicalDevice *);
typedef void (*PFN_vkGetPhysicalDeviceProperties)(VkPhysicalDevice, VkPhysicalDeviceProperties *);

#define VK_API_VERSION_1_0 (1u << 22)
#define VK_ERROR_INCOMPATIBLE_DRIVER (-9)
#define NVIDIA_VENDOR_ID 0x10DEu
#define MAX_DEVICES 16u

static PFN_vkVoidFunction instance_function(PFN_vkGetInstanceProcAddr get, VkInstance instance, const char *name) {
    PFN_vkVoidFunction found = get(instance, name);
    if (found == NULL) {
        fail(CHECK, "the loader has no %s", name);
    }
    return found;
}

int main(void) {
    void *library = open_library(CHECK, SONAME);
    PFN_vkGetInstanceProcAddr get =
        (PFN_vkGetInstanceProcAddr)symbol(CHECK, library, SONAME, "vkGetInstanceProcAddr");
    PFN_vkCreateInstance create = (PFN_vkCreateInstance)instance_function(get, NULL, "vkCreateInstance");

    VkApplicationInfo application = {0, NULL, "gpu-cp-vulkan-probe", 1, NULL, 0, VK_API_VERSION_1_0};
    VkInstanceCreateInfo info = {1, NULL, 0, &application, 0, NULL, 0, NULL};
    VkInstance instance = NULL;
    VkResult result = create(&info, NULL, &instance);
    if (result == VK_ERROR_INCOMPATIBLE_DRIVER) {
        fail(CHECK, "vkCreateInstance %d (VK_ERROR_INCOMPATIBLE_DRIVER: no ICD found)", result);
    }
    if (result != 0) {
        fail(CHECK, "vkCreateInstance %d", result);
    }
    PFN_vkEnumeratePhysicalDevices enumerate =
        (PFN_vkEnumeratePhysicalDevices)instance_function(get, instance, "vkEnumeratePhysicalDevices");
    PFN_vkGetPhysicalDeviceProperties properties_of =
        (PFN_vkGetPhysicalDeviceProperties)instance_function(get, instance, "vkGetPhysicalDeviceProperties");
    PFN_vkDestroyInstance destroy = (PFN_vkDestroyInstance)instance_function(get, instance, "vkDestroyInstance");

    VkPhysicalDevice devices[MAX_DEVICES];
    uint32_t count = MAX_DEVICES;
    result = enumerate(instance, &count, devices);
    if (result < 0) {
        fail(CHECK, "vkEnumeratePhysicalDevices %d", result);
    }
    if (count == 0) {
        destroy(instance, NULL);
        printf("%s NO DEVICE\n", CHECK);
        return 2;
    }
    VkPhysicalDeviceProperties chosen;
    memset(&chosen, 0, sizeof chosen);
    for (uint32_t i = 0; i < count; i++) {
        VkPhysicalDeviceProperties properties;
        memset(&properties, 0, sizeof properties);
        properties_of(devices[i], &properties);
        if (i == 0 || properties.vendorID == NVIDIA_VENDOR_ID) {
            chosen = properties;
        }
        if (properties.vendorID == NVIDIA_VENDOR_ID) {
            break;
        }
    }
    chosen.deviceName[sizeof chosen.deviceName - 1] = '\0';
    printf("%s OK %s api %u.%u.%u\n", CHECK, chosen.deviceName, (chosen.apiVersion >> 22) & 0x7Fu,
           (chosen.apiVersion >> 12) & 0x3FFu, chosen.apiVersion & 0xFFFu);
    destroy(instance, NULL);
    return 0;
}
