/* image_loader_open: one entry point for every image dataset (data.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/cifar10.h"
#include "datasets/data.h"
#include "datasets/imagefolder.h"
#include "datasets/mnist.h"

/* "name" or "name:arg": returns arg (NULL when absent) if the prefix matches */
static int match(const char *spec, const char *name, const char **arg) {
    size_t n = strlen(name);
    if (strncmp(spec, name, n) != 0) return 0;
    if (spec[n] == '\0') {
        *arg = NULL;
        return 1;
    }
    if (spec[n] == ':') {
        *arg = spec[n + 1] ? spec + n + 1 : NULL;
        return 1;
    }
    return 0;
}

int image_loader_open(ImageLoader **out, const char *dataset, int train, const LoaderOpts *o, char *err,
                      size_t errlen) {
    *out = NULL;
    const char *arg = NULL;
    int rc;
    if (match(dataset, "cifar10", &arg) || match(dataset, "mnist", &arg)) {
        int is_cifar = dataset[0] == 'c';
        ImageSet *s = calloc(1, sizeof *s);
        if (!s) {
            snprintf(err, errlen, "out of memory");
            return -GC_ERR_NOMEM;
        }
        rc = is_cifar ? cifar10_load(s, arg, train, err, errlen) : mnist_load(s, arg, train, err, errlen);
        if (rc == 0) rc = imageset_loader(out, s, 1, o, err, errlen);
        if (rc) {
            imageset_free(s);
            free(s);
        }
        return rc;
    }
    if (match(dataset, "folder", &arg)) {
        if (!arg) {
            snprintf(err, errlen, "dataset 'folder' needs a root: folder:ROOT (ROOT/train/<class>/..., ROOT/val/...)");
            return -GC_ERR_PARAM;
        }
        FolderSet *s = calloc(1, sizeof *s);
        if (!s) {
            snprintf(err, errlen, "out of memory");
            return -GC_ERR_NOMEM;
        }
        rc = folderset_scan(s, arg, train, err, errlen);
        if (rc == 0) rc = folder_loader(out, s, 1, o, err, errlen);
        if (rc) {
            folderset_free(s);
            free(s);
        }
        return rc;
    }
    snprintf(err, errlen,
             "unknown image dataset '%s': use cifar10[:DIR], mnist[:DIR] (default DIR under $DATA_DIR) or "
             "folder:ROOT",
             dataset);
    return -GC_ERR_PARAM;
}
