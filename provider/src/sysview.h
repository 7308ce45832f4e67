/*
 * The sysfs view (internal/sysfs): the NICs' entries of
 * /sys/class/infiniband, /sys/class/infiniband_verbs and /dev/infiniband,
 * which they write into the run directory's view/ since they cannot
 * write the kernel's. rnic's libibverbs reads its sysfs files there
 * (ibv_read_sysfs_file), and rnic exec's preloaded library
 * (provider/sysfs) shows programs those paths there.
 */
#ifndef RNIC_SYSVIEW_H
#define RNIC_SYSVIEW_H

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "hostif.h"

/* The kernel's paths the view stands in for. A path is in the view if
 * it is one of these or below one ("/sys/class/infiniband_verbs" is not
 * below "/sys/class/infiniband"). */
static const char *const sysview_prefixes[] = {"/sys/class/infiniband", "/sys/class/infiniband_verbs", "/dev/infiniband"};

/* sysview_prefix returns the length of the prefix path is in, 0 if none. */
static inline size_t sysview_prefix(const char *path)
{
	/* Most paths a program opens are not: one comparison rules out
	 * nearly all of them before any string compare. */
	if (!path || path[0] != '/' || (path[1] != 's' && path[1] != 'd'))
		return 0;
	for (size_t i = 0; i < sizeof sysview_prefixes / sizeof *sysview_prefixes; i++) {
		size_t n = strlen(sysview_prefixes[i]);
		if (!strncmp(path, sysview_prefixes[i], n) && (path[n] == 0 || path[n] == '/'))
			return n;
	}
	return 0;
}

/* sysview_root writes the view's directory: the run directory's view/. */
static inline void sysview_root(char *out, size_t n)
{
	char dir[PATH_MAX - sizeof "/view"];
	hostif_run_dir(dir, sizeof dir);
	snprintf(out, n, "%s/view", dir);
}

/* sysview_map writes the view's path for path into out and returns 1 if
 * path is in the view (0 if not, or if the result does not fit: the
 * path is then used as it is). */
static inline int sysview_map(const char *root, const char *path, char *out, size_t n)
{
	if (!sysview_prefix(path))
		return 0;
	size_t r = strlen(root), p = strlen(path);
	if (r + p >= n)
		return 0;
	memcpy(out, root, r);
	memcpy(out + r, path, p + 1);
	return 1;
}

#endif
