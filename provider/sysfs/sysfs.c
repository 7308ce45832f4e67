/*
 * librnic-sysfs.so: the sysfs view for programs run by rnic exec
 * (LD_PRELOAD). Libraries look at a device outside the verbs before
 * they use it: UCX skips a device whose /dev/infiniband node it cannot
 * stat and reads its GID types, NUMA node and netdev under
 * /sys/class/infiniband; rdma-core's tests find the netdev under
 * device/net. A user's process cannot create those paths, so rnic's
 * NICs write what the kernel would show into the run directory's view/
 * (internal/sysfs), and this library turns the C library's path calls
 * for /sys/class/infiniband, /sys/class/infiniband_verbs and
 * /dev/infiniband into calls on the view. Every other path goes to the
 * C library untouched, after one comparison of its first two bytes.
 *
 * The device nodes are symbolic links to the NICs' sockets in the view;
 * stat reports them as the character devices the kernel has (uverbs'
 * major 231, minor 192 + N), with the socket's owner and permissions,
 * which are who may use the NIC. Opening one fails (ENXIO, the socket's
 * answer): rnic's libibverbs talks to the socket itself.
 *
 * What it does not reach: programs that make system calls without the C
 * library (statically linked, Go without cgo, raw syscall(2),
 * io_uring), and the C library's own internal calls (nftw and glob walk
 * with calls it makes inside itself). docs/verbs.md weighs this against
 * the other ways.
 */
#define _GNU_SOURCE
#include <alloca.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "../src/sysview.h"

/* The view's directory, found once (the run directory comes from the
 * environment rnic exec gave the program). */
static char root[PATH_MAX];
static size_t root_len;
static int root_state; /* 0 not yet, 1 set */

static const char *view_root(void)
{
	if (!__atomic_load_n(&root_state, __ATOMIC_ACQUIRE)) {
		char r[PATH_MAX];
		sysview_root(r, sizeof r);
		/* Two threads may both get here: they write the same bytes. */
		memcpy(root, r, sizeof r);
		root_len = strlen(root);
		__atomic_store_n(&root_state, 1, __ATOMIC_RELEASE);
	}
	return root;
}

/* map_view returns the view's path for a path in the view, written into
 * buf (PATH_MAX bytes), or path itself if it does not fit. */
static const char *map_view(const char *path, char *buf)
{
	return sysview_map(view_root(), path, buf, PATH_MAX) ? buf : path;
}

/* VIEW declares p, the path to use for path. Almost every path a
 * program names is not in the view: for those it costs a look at two
 * bytes (sysview_prefix), and the buffer for the view's path is taken
 * from the stack only when one is. */
#define VIEW(p, path)                                                    \
	char *p##_buf = sysview_prefix(path) ? alloca(PATH_MAX) : NULL;  \
	const char *p = p##_buf ? map_view(path, p##_buf) : (path)

/* devnode returns the N of a path /dev/infiniband/uverbsN, -1 for other
 * entries of /dev/infiniband, -2 for paths that are none. */
static int devnode(const char *path)
{
	static const char dev[] = "/dev/infiniband/";
	if (!path || strncmp(path, dev, sizeof dev - 1))
		return -2;
	const char *e = path + sizeof dev - 1;
	if (!*e || strchr(e, '/'))
		return -2;
	if (strncmp(e, "uverbs", 6) || !e[6])
		return -1;
	char *end;
	long n = strtol(e + 6, &end, 10);
	return *end || n < 0 || n > 1000000 ? -1 : (int)n;
}

/* is_node reports whether path names an entry of /dev/infiniband (two
 * bytes rule out nearly every other path). */
static inline int is_node(const char *path)
{
	return path && path[0] == '/' && path[1] == 'd' && devnode(path) != -2;
}

/* fix_node makes the stat of a device node's socket the node's. */
static void fix_node(const char *path, mode_t *mode, dev_t *rdev)
{
	int n = devnode(path);
	if (n == -2)
		return;
	*mode = S_IFCHR | (*mode & 07777);
	if (rdev)
		*rdev = n >= 0 ? makedev(231, 192 + n) : 0;
}

/* fix_mode: only a socket can be a node (most stats are of files). */
static inline void fix_mode(const char *path, mode_t *mode, dev_t *rdev)
{
	if (__builtin_expect(S_ISSOCK(*mode), 0))
		fix_node(path, mode, rdev);
}

#define REAL(ret, name, args)                                                         \
	static ret(*real_##name) args;                                                \
	static ret(*get_##name(void)) args                                            \
	{                                                                             \
		ret(*f) args = __atomic_load_n(&real_##name, __ATOMIC_ACQUIRE);       \
		if (!f) {                                                             \
			f = (ret(*) args)dlsym(RTLD_NEXT, #name);                     \
			__atomic_store_n(&real_##name, f, __ATOMIC_RELEASE);          \
		}                                                                     \
		return f;                                                             \
	}

/* A missing C library function (an older glibc): ENOSYS, as a kernel
 * without the call says. */
#define CALL(name, fail, ...)                  \
	do {                                   \
		if (!get_##name()) {           \
			errno = ENOSYS;        \
			return fail;           \
		}                              \
		return get_##name()(__VA_ARGS__); \
	} while (0)

/* --- open --- */

/* O_CREAT and O_TMPFILE take a mode (the variadic argument). */
#define MODE_ARG(flags, mode)                                                     \
	mode_t mode = 0;                                                          \
	if (((flags) & O_CREAT) || ((flags) & O_TMPFILE) == O_TMPFILE) {          \
		va_list ap;                                           \
		va_start(ap, flags);                                  \
		mode = va_arg(ap, mode_t);                            \
		va_end(ap);                                           \
	}

REAL(int, open, (const char *, int, ...))
REAL(int, open64, (const char *, int, ...))
REAL(int, openat, (int, const char *, int, ...))
REAL(int, openat64, (int, const char *, int, ...))
REAL(int, __open_2, (const char *, int))
REAL(int, __open64_2, (const char *, int))
REAL(int, __openat_2, (int, const char *, int))
REAL(int, __openat64_2, (int, const char *, int))

int open(const char *path, int flags, ...)
{
	VIEW(mp, path);
	MODE_ARG(flags, mode)
	CALL(open, -1, mp, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	VIEW(mp, path);
	MODE_ARG(flags, mode)
	CALL(open64, -1, mp, flags, mode);
}

int openat(int dirfd, const char *path, int flags, ...)
{
	VIEW(mp, path);
	MODE_ARG(flags, mode)
	CALL(openat, -1, dirfd, mp, flags, mode);
}

int openat64(int dirfd, const char *path, int flags, ...)
{
	VIEW(mp, path);
	MODE_ARG(flags, mode)
	CALL(openat64, -1, dirfd, mp, flags, mode);
}

int __open_2(const char *path, int flags)
{
	VIEW(mp, path);
	CALL(__open_2, -1, mp, flags);
}

int __open64_2(const char *path, int flags)
{
	VIEW(mp, path);
	CALL(__open64_2, -1, mp, flags);
}

int __openat_2(int dirfd, const char *path, int flags)
{
	VIEW(mp, path);
	CALL(__openat_2, -1, dirfd, mp, flags);
}

int __openat64_2(int dirfd, const char *path, int flags)
{
	VIEW(mp, path);
	CALL(__openat64_2, -1, dirfd, mp, flags);
}

REAL(FILE *, fopen, (const char *, const char *))
REAL(FILE *, fopen64, (const char *, const char *))
REAL(FILE *, freopen, (const char *, const char *, FILE *))
REAL(FILE *, freopen64, (const char *, const char *, FILE *))

FILE *fopen(const char *path, const char *mode)
{
	VIEW(mp, path);
	CALL(fopen, NULL, mp, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
	VIEW(mp, path);
	CALL(fopen64, NULL, mp, mode);
}

FILE *freopen(const char *path, const char *mode, FILE *f)
{
	VIEW(mp, path);
	CALL(freopen, NULL, path ? mp : NULL, mode, f);
}

FILE *freopen64(const char *path, const char *mode, FILE *f)
{
	VIEW(mp, path);
	CALL(freopen64, NULL, path ? mp : NULL, mode, f);
}

/* --- directories --- */

REAL(DIR *, opendir, (const char *))
REAL(int, chdir, (const char *))
REAL(int, scandir, (const char *, struct dirent ***, int (*)(const struct dirent *),
		    int (*)(const struct dirent **, const struct dirent **)))
REAL(int, scandir64, (const char *, struct dirent64 ***, int (*)(const struct dirent64 *),
		      int (*)(const struct dirent64 **, const struct dirent64 **)))

DIR *opendir(const char *path)
{
	VIEW(mp, path);
	CALL(opendir, NULL, mp);
}

int chdir(const char *path)
{
	VIEW(mp, path);
	CALL(chdir, -1, mp);
}

int scandir(const char *path, struct dirent ***list, int (*sel)(const struct dirent *),
	    int (*cmp)(const struct dirent **, const struct dirent **))
{
	VIEW(mp, path);
	CALL(scandir, -1, mp, list, sel, cmp);
}

int scandir64(const char *path, struct dirent64 ***list, int (*sel)(const struct dirent64 *),
	      int (*cmp)(const struct dirent64 **, const struct dirent64 **))
{
	VIEW(mp, path);
	CALL(scandir64, -1, mp, list, sel, cmp);
}

/* --- stat --- */

/* A device node is stat'ed through its link (lstat too: the link is
 * the view's way of naming the socket, not something the kernel's
 * /dev/infiniband has). */
#define NODE_FOLLOW(path) is_node(path)

REAL(int, stat, (const char *, struct stat *))
REAL(int, stat64, (const char *, struct stat64 *))
REAL(int, lstat, (const char *, struct stat *))
REAL(int, lstat64, (const char *, struct stat64 *))
REAL(int, fstatat, (int, const char *, struct stat *, int))
REAL(int, fstatat64, (int, const char *, struct stat64 *, int))
REAL(int, __xstat, (int, const char *, struct stat *))
REAL(int, __xstat64, (int, const char *, struct stat64 *))
REAL(int, __lxstat, (int, const char *, struct stat *))
REAL(int, __lxstat64, (int, const char *, struct stat64 *))
REAL(int, __fxstatat, (int, int, const char *, struct stat *, int))
REAL(int, __fxstatat64, (int, int, const char *, struct stat64 *, int))
REAL(int, statx, (int, const char *, int, unsigned int, struct statx *))

#define STAT_BODY(call, st)                               \
	do {                                              \
		int r_ = (call);                          \
		if (r_ == 0)                              \
			fix_mode(path, &(st)->st_mode, &(st)->st_rdev); \
		return r_;                                \
	} while (0)

#define NEED(name)                     \
	if (!get_##name()) {           \
		errno = ENOSYS;        \
		return -1;             \
	}

int stat(const char *path, struct stat *st)
{
	VIEW(mp, path);
	NEED(stat);
	STAT_BODY(get_stat()(mp, st), st);
}

int stat64(const char *path, struct stat64 *st)
{
	VIEW(mp, path);
	NEED(stat64);
	STAT_BODY(get_stat64()(mp, st), st);
}

int lstat(const char *path, struct stat *st)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		return stat(path, st);
	NEED(lstat);
	STAT_BODY(get_lstat()(mp, st), st);
}

int lstat64(const char *path, struct stat64 *st)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		return stat64(path, st);
	NEED(lstat64);
	STAT_BODY(get_lstat64()(mp, st), st);
}

int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		flags &= ~AT_SYMLINK_NOFOLLOW;
	NEED(fstatat);
	STAT_BODY(get_fstatat()(dirfd, mp, st, flags), st);
}

int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		flags &= ~AT_SYMLINK_NOFOLLOW;
	NEED(fstatat64);
	STAT_BODY(get_fstatat64()(dirfd, mp, st, flags), st);
}

/* The stat calls of binaries built against glibc before 2.33. */
int __xstat(int ver, const char *path, struct stat *st)
{
	VIEW(mp, path);
	NEED(__xstat);
	STAT_BODY(get___xstat()(ver, mp, st), st);
}

int __xstat64(int ver, const char *path, struct stat64 *st)
{
	VIEW(mp, path);
	NEED(__xstat64);
	STAT_BODY(get___xstat64()(ver, mp, st), st);
}

int __lxstat(int ver, const char *path, struct stat *st)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		return __xstat(ver, path, st);
	NEED(__lxstat);
	STAT_BODY(get___lxstat()(ver, mp, st), st);
}

int __lxstat64(int ver, const char *path, struct stat64 *st)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		return __xstat64(ver, path, st);
	NEED(__lxstat64);
	STAT_BODY(get___lxstat64()(ver, mp, st), st);
}

int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		flags &= ~AT_SYMLINK_NOFOLLOW;
	NEED(__fxstatat);
	STAT_BODY(get___fxstatat()(ver, dirfd, mp, st, flags), st);
}

int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		flags &= ~AT_SYMLINK_NOFOLLOW;
	NEED(__fxstatat64);
	STAT_BODY(get___fxstatat64()(ver, dirfd, mp, st, flags), st);
}

int statx(int dirfd, const char *path, int flags, unsigned int mask, struct statx *st)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		flags &= ~AT_SYMLINK_NOFOLLOW;
	NEED(statx);
	int r = get_statx()(dirfd, mp, flags, mask, st);
	if (r == 0) {
		mode_t m = st->stx_mode;
		dev_t rdev = makedev(st->stx_rdev_major, st->stx_rdev_minor);
		fix_mode(path, &m, &rdev);
		st->stx_mode = (uint16_t)m;
		st->stx_rdev_major = major(rdev);
		st->stx_rdev_minor = minor(rdev);
	}
	return r;
}

/* --- access --- */

REAL(int, access, (const char *, int))
REAL(int, faccessat, (int, const char *, int, int))
REAL(int, euidaccess, (const char *, int))
REAL(int, eaccess, (const char *, int))

int access(const char *path, int how)
{
	VIEW(mp, path);
	CALL(access, -1, mp, how);
}

int faccessat(int dirfd, const char *path, int how, int flags)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		flags &= ~AT_SYMLINK_NOFOLLOW;
	CALL(faccessat, -1, dirfd, mp, how, flags);
}

int euidaccess(const char *path, int how)
{
	VIEW(mp, path);
	CALL(euidaccess, -1, mp, how);
}

int eaccess(const char *path, int how)
{
	VIEW(mp, path);
	CALL(eaccess, -1, mp, how);
}

/* --- links and names --- */

REAL(ssize_t, readlink, (const char *, char *, size_t))
REAL(ssize_t, readlinkat, (int, const char *, char *, size_t))
REAL(char *, realpath, (const char *, char *))

ssize_t readlink(const char *path, char *out, size_t n)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path)) { /* a device node is no link */
		errno = EINVAL;
		return -1;
	}
	CALL(readlink, -1, mp, out, n);
}

ssize_t readlinkat(int dirfd, const char *path, char *out, size_t n)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path)) {
		errno = EINVAL;
		return -1;
	}
	CALL(readlinkat, -1, dirfd, mp, out, n);
}

/* realpath of a path in the view is the kernel's path it stands for: the
 * view's prefix is taken off the result (a link out of the view, such as
 * device/net/IF, resolves to where it points). A device node resolves to
 * itself. */
char *realpath(const char *path, char *resolved)
{
	if (!get_realpath()) {
		errno = ENOSYS;
		return NULL;
	}
	if (!sysview_prefix(path))
		return get_realpath()(path, resolved);
	if (NODE_FOLLOW(path)) {
		struct stat st;
		if (stat(path, &st))
			return NULL;
		if (strlen(path) >= PATH_MAX) {
			errno = ENAMETOOLONG;
			return NULL;
		}
		char *out = resolved ? resolved : malloc(PATH_MAX);
		if (!out)
			return NULL;
		return strcpy(out, path);
	}
	VIEW(mp, path);
	char tmp[PATH_MAX];
	if (!get_realpath()(mp, tmp))
		return NULL;
	const char *r = tmp;
	view_root();
	if (mp != path && !strncmp(tmp, root, root_len) && (tmp[root_len] == '/' || !tmp[root_len]))
		r = tmp[root_len] ? tmp + root_len : "/";
	char *out = resolved ? resolved : malloc(PATH_MAX);
	if (!out)
		return NULL;
	return strcpy(out, r);
}

char *__realpath_chk(const char *path, char *resolved, size_t n)
{
	if (resolved && n < PATH_MAX) /* what the fortified call checks */
		abort();
	return realpath(path, resolved);
}

char *canonicalize_file_name(const char *path)
{
	return realpath(path, NULL);
}

/* --- extended attributes (ls -l asks for SELinux labels) --- */

REAL(ssize_t, getxattr, (const char *, const char *, void *, size_t))
REAL(ssize_t, lgetxattr, (const char *, const char *, void *, size_t))
REAL(ssize_t, listxattr, (const char *, char *, size_t))
REAL(ssize_t, llistxattr, (const char *, char *, size_t))

ssize_t getxattr(const char *path, const char *name, void *value, size_t n)
{
	VIEW(mp, path);
	CALL(getxattr, -1, mp, name, value, n);
}

ssize_t lgetxattr(const char *path, const char *name, void *value, size_t n)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		return getxattr(path, name, value, n);
	CALL(lgetxattr, -1, mp, name, value, n);
}

ssize_t listxattr(const char *path, char *list, size_t n)
{
	VIEW(mp, path);
	CALL(listxattr, -1, mp, list, n);
}

ssize_t llistxattr(const char *path, char *list, size_t n)
{
	VIEW(mp, path);
	if (NODE_FOLLOW(path))
		return listxattr(path, list, n);
	CALL(llistxattr, -1, mp, list, n);
}
