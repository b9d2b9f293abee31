/* What every probe shares: one line on stdout, "<CHECK> OK ..." (exit 0) or "<CHECK> FAIL <reason>"
 * (exit 1), so a run's output can be quoted line by line. The libraries are opened with dlopen by
 * their sonames, so the probes build with gcc and libc6-dev alone (no Vulkan, EGL, OpenCL or NVIDIA
 * headers) and a missing library is a clear line rather than a loader error before main. */
#ifndef GPU_CP_PROBE_H
#define GPU_CP_PROBE_H

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void fail(const char *check, const char *format, ...) __attribute__((noreturn, format(printf, 2, 3)));

static void fail(const char *check, const char *format, ...) {
    va_list args;
    va_start(args, format);
    printf("%s FAIL ", check);
    vprintf(format, args);
    printf("\n");
    va_end(args);
    fflush(stdout);
    exit(1);
}

/* The library by its soname, or a FAIL line with the loader's reason. */
__attribute__((unused)) static void *open_library(const char *check, const char *soname) {
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fail(check, "cannot load %s: %s", soname, dlerror());
    }
    return handle;
}

/* A symbol of an opened library, or a FAIL line naming it. */
__attribute__((unused)) static void *symbol(const char *check, void *handle, const char *soname, const char *name) {
    void *found = dlsym(handle, name);
    if (found == NULL) {
        fail(check, "%s has no %s", soname, name);
    }
    return found;
}

#endif
