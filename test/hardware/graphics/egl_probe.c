/* Headless EGL through glvnd's libEGL of the image (Debian's libegl1): the devices
 * (EGL_EXT_device_enumeration), a display on the first device that initialises
 * (EGL_PLATFORM_DEVICE_EXT), an OpenGL ES 2 context made current with no surface at all
 * (EGL_KHR_surfaceless_context), and the renderer it reports.
 *   EGL OK <vendor> <version> devices <n> renderer <GL_RENDERER>   exit 0
 *   EGL FAIL <reason>                                              exit 1: no libEGL, no device (no
 *                                                                  vendor file), no context, ...
 * The few EGL types and enums used are declared here with the values of egl.h and eglext.h. */
#include <stdint.h>
#include <string.h>

#include "probe.h"

#define CHECK "EGL"
#define SONAME "libEGL.so.1"

typedef int32_t EGLint;
typedef unsigned int EGLBoolean;
typedef unsigned int EGLenum;
typedef void *EGLDisplay;
typedef void *EGLDeviceEXT;
typedef void *EGLConfig;
typedef void *EGLContext;
typedef void *EGLSurface;
typedef void (*EGLFunction)(void);

#define EGL_NONE 0x3038
#define EGL_VENDOR 0x3053
#define EGL_VERSION 0x3054
#define EGL_EXTENSIONS 0x3055
#define EGL_SURFACE_TYPE 0x3033
#define EGL_PBUFFER_BIT 0x0001
#define EGL_RENDERABLE_TYPE 0x3040
#define EGL_OPENGL_ES2_BIT 0x0004
#define EGL_OPENGL_ES_API 0x30A0
#define EGL_CONTEXT_CLIENT_VERSION 0x3098
#define EGL_PLATFORM_DEVICE_EXT 0x313F
#define GL_RENDERER 0x1F01
#define MAX_DEVICES 16

typedef EGLFunction (*PFN_eglGetProcAddress)(const char *);
typedef EGLint (*PFN_eglGetError)(void);
typedef EGLBoolean (*PFN_eglQueryDevicesEXT)(EGLint, EGLDeviceEXT *, EGLint *);
typedef EGLDisplay (*PFN_eglGetPlatformDisplayEXT)(EGLenum, void *, const EGLint *);
typedef EGLBoolean (*PFN_eglInitialize)(EGLDisplay, EGLint *, EGLint *);
typedef EGLBoolean (*PFN_eglTerminate)(EGLDisplay);
typedef const char *(*PFN_eglQueryString)(EGLDisplay, EGLint);
typedef EGLBoolean (*PFN_eglBindAPI)(EGLenum);
typedef EGLBoolean (*PFN_eglChooseConfig)(EGLDisplay, const EGLint *, EGLConfig *, EGLint, EGLint *);
typedef EGLContext (*PFN_eglCreateContext)(EGLDisplay, EGLConfig, EGLContext, const EGLint *);
typedef EGLBoolean (*PFN_eglMakeCurrent)(EGLDisplay, EGLSurface, EGLSurface, EGLContext);
typedef EGLBoolean (*PFN_eglDestroyContext)(EGLDisplay, EGLContext);
typedef const unsigned char *(*PFN_glGetString)(unsigned int);

static PFN_eglGetProcAddress get_proc;

static EGLFunction function(const char *name) {
    EGLFunction found = get_proc(name);
    if (found == NULL) {
        fail(CHECK, "eglGetProcAddress(%s) is NULL", name);
    }
    return found;
}

static int has_extension(const char *extensions, const char *name) {
    size_t length = strlen(name);
    for (const char *at = extensions; at != NULL && (at = strstr(at, name)) != NULL; at += length) {
        if ((at == extensions || at[-1] == ' ') && (at[length] == ' ' || at[length] == '\0')) {
            return 1;
        }
    }
    return 0;
}

int main(void) {
    void *library = open_library(CHECK, SONAME);
    get_proc = (PFN_eglGetProcAddress)symbol(CHECK, library, SONAME, "eglGetProcAddress");
    PFN_eglGetError error = (PFN_eglGetError)function("eglGetError");
    PFN_eglQueryDevicesEXT query_devices = (PFN_eglQueryDevicesEXT)function("eglQueryDevicesEXT");
    PFN_eglGetPlatformDisplayEXT platform_display = (PFN_eglGetPlatformDisplayEXT)function("eglGetPlatformDisplayEXT");
    PFN_eglInitialize initialize = (PFN_eglInitialize)function("eglInitialize");
    PFN_eglTerminate terminate = (PFN_eglTerminate)function("eglTerminate");
    PFN_eglQueryString query_string = (PFN_eglQueryString)function("eglQueryString");

    EGLDeviceEXT devices[MAX_DEVICES];
    EGLint count = 0;
    if (!query_devices(MAX_DEVICES, devices, &count)) {
        fail(CHECK, "eglQueryDevicesEXT failed (0x%x)", (unsigned)error());
    }
    if (count == 0) {
        fail(CHECK, "eglQueryDevicesEXT found no device (no EGL vendor file or no device node?)");
    }
    EGLDisplay display = NULL;
    EGLint major = 0;
    EGLint minor = 0;
    for (EGLint i = 0; i < count && display == NULL; i++) {
        EGLDisplay candidate = platform_display(EGL_PLATFORM_DEVICE_EXT, devices[i], NULL);
        if (candidate != NULL && initialize(candidate, &major, &minor)) {
            display = candidate;
        }
    }
    if (display == NULL) {
        fail(CHECK, "none of %d devices gave a display that initialises (0x%x)", count, (unsigned)error());
    }
    const char *vendor = query_string(display, EGL_VENDOR);
    const char *version = query_string(display, EGL_VERSION);
    if (!has_extension(query_string(display, EGL_EXTENSIONS), "EGL_KHR_surfaceless_context")) {
        fail(CHECK, "%s's display has no EGL_KHR_surfaceless_context", vendor ? vendor : "?");
    }

    PFN_eglBindAPI bind_api = (PFN_eglBindAPI)function("eglBindAPI");
    PFN_eglChooseConfig choose_config = (PFN_eglChooseConfig)function("eglChooseConfig");
    PFN_eglCreateContext create_context = (PFN_eglCreateContext)function("eglCreateContext");
    PFN_eglMakeCurrent make_current = (PFN_eglMakeCurrent)function("eglMakeCurrent");
    PFN_eglDestroyContext destroy_context = (PFN_eglDestroyContext)function("eglDestroyContext");
    if (!bind_api(EGL_OPENGL_ES_API)) {
        fail(CHECK, "eglBindAPI(EGL_OPENGL_ES_API) failed (0x%x)", (unsigned)error());
    }
    const EGLint config_attributes[] = {EGL_SURFACE_TYPE, EGL_PBUFFER_BIT, EGL_RENDERABLE_TYPE, EGL_OPENGL_ES2_BIT,
                                        EGL_NONE};
    EGLConfig config = NULL;
    EGLint configs = 0;
    if (!choose_config(display, config_attributes, &config, 1, &configs) || configs == 0) {
        fail(CHECK, "eglChooseConfig found no OpenGL ES 2 config (0x%x)", (unsigned)error());
    }
    const EGLint context_attributes[] = {EGL_CONTEXT_CLIENT_VERSION, 2, EGL_NONE};
    EGLContext context = create_context(display, config, NULL, context_attributes);
    if (context == NULL) {
        fail(CHECK, "eglCreateContext failed (0x%x)", (unsigned)error());
    }
    if (!make_current(display, NULL, NULL, context)) {
        fail(CHECK, "eglMakeCurrent with no surface failed (0x%x)", (unsigned)error());
    }
    PFN_glGetString get_string = (PFN_glGetString)function("glGetString");
    const unsigned char *renderer = get_string(GL_RENDERER);
    if (renderer == NULL) {
        fail(CHECK, "glGetString(GL_RENDERER) is NULL in the current context");
    }
    printf("%s OK %s %s devices %d renderer %s\n", CHECK, vendor ? vendor : "?", version ? version : "?", count,
           (const char *)renderer);
    make_current(display, NULL, NULL, NULL);
    destroy_context(display, context);
    terminate(display);
    return 0;
}
