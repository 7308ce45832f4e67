/*
 * rnic's libibverbs: the verbs library that programs load instead of
 * rdma-core's when they run on rnic (rnic exec), speaking rnic's host
 * interface (internal/hostif: a SOCK_SEQPACKET socket per NIC, shared
 * rings) instead of the kernel's uverbs. It is compiled against the
 * system's <infiniband/verbs.h>, so that the structures and the inline
 * verbs compiled into programs match, and exports the symbol versions
 * programs import (libibverbs.map).
 *
 * This first part: the device list (a NIC is a socket in the run
 * directory), names and node GUIDs.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "hostif.h"
#include "rnic.h"

static int cmp_dev(const void *a, const void *b)
{
	const struct rnic_device *x = *(struct rnic_device *const *)a, *y = *(struct rnic_device *const *)b;
	return strcmp(x->ibdev.name, y->ibdev.name);
}

/* Every device this process has listed, kept while a list or a context
 * holds it (rnic.h). */
static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rnic_device *devices;

/* unlink_free frees a device nobody holds; devices_lock is held. */
static void unlink_free(struct rnic_device *dev)
{
	for (struct rnic_device **p = &devices; *p; p = &(*p)->next)
		if (*p == dev) {
			*p = dev->next;
			break;
		}
	free(dev);
}

void rnic_device_get(struct ibv_device *d)
{
	pthread_mutex_lock(&devices_lock);
	((struct rnic_device *)d)->refs++;
	pthread_mutex_unlock(&devices_lock);
}

void rnic_device_put(struct ibv_device *d)
{
	struct rnic_device *dev = (struct rnic_device *)d;
	pthread_mutex_lock(&devices_lock);
	if (--dev->refs == 0 && dev->gone)
		unlink_free(dev);
	pthread_mutex_unlock(&devices_lock);
}

/* uverbs_index is the number a NIC named rnicN has among the host's
 * verbs devices, N, as the kernel numbers uverbsN; the NIC's sysfs
 * view (internal/sysfs) uses the same. -1 for a name without one. */
static int uverbs_index(const char *name)
{
	size_t n = strlen(name), i = n;
	while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9')
		i--;
	if (i == n || n - i > 6)
		return -1;
	return atoi(name + i);
}

/* find_or_add returns the device of the NIC name on socket, the one
 * already known if there is one; devices_lock is held. */
static struct rnic_device *find_or_add(const char *name, const char *socket)
{
	for (struct rnic_device *d = devices; d; d = d->next)
		if (!strcmp(d->ibdev.name, name) && !strcmp(d->socket, socket))
			return d;
	struct rnic_device *dev = calloc(1, sizeof *dev);
	if (!dev)
		return NULL;
	snprintf(dev->socket, sizeof dev->socket, "%s", socket);
	snprintf(dev->ibdev.name, sizeof dev->ibdev.name, "%s", name);
	/* The names the kernel's devices have: uverbsN, its class path,
	 * the device's class path. rnic's library opens none of them; the
	 * sysfs view of rnic exec shows what programs look for there. */
	int u = uverbs_index(name);
	if (u >= 0)
		snprintf(dev->ibdev.dev_name, sizeof dev->ibdev.dev_name, "uverbs%d", u);
	else
		snprintf(dev->ibdev.dev_name, sizeof dev->ibdev.dev_name, "%s", name);
	snprintf(dev->ibdev.dev_path, sizeof dev->ibdev.dev_path, "/sys/class/infiniband_verbs/%s", dev->ibdev.dev_name);
	snprintf(dev->ibdev.ibdev_path, sizeof dev->ibdev.ibdev_path, "/sys/class/infiniband/%s", name);
	dev->ibdev.node_type = IBV_NODE_CA;
	dev->ibdev.transport_type = IBV_TRANSPORT_IB;
	dev->next = devices;
	devices = dev;
	return dev;
}

struct ibv_device **ibv_get_device_list(int *num)
{
	char dir[PATH_MAX];
	hostif_run_dir(dir, sizeof dir);
	int n = 0, cap = 8;
	struct ibv_device **list = calloc(cap + 1, sizeof *list);
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&devices_lock);
	/* A device not found this time is gone: freed now if nobody holds
	 * it, else when the last holder lets it go. */
	for (struct rnic_device *d = devices; d; d = d->next)
		d->gone = 1;
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			size_t len = strlen(e->d_name);
			if (len <= 5 || strcmp(e->d_name + len - 5, ".sock") || len - 5 >= IBV_SYSFS_NAME_MAX)
				continue;
			char socket[sizeof(((struct rnic_device *)0)->socket)], name[IBV_SYSFS_NAME_MAX];
			if ((size_t)snprintf(socket, sizeof socket, "%s/%s", dir, e->d_name) >= sizeof socket)
				continue;
			int fd = hostif_connect(socket);
			if (fd < 0) /* a stale socket: its NIC is gone */
				continue;
			close(fd);
			memcpy(name, e->d_name, len - 5);
			name[len - 5] = 0;
			if (n == cap) {
				struct ibv_device **l = realloc(list, (2 * cap + 1) * sizeof *list);
				if (!l)
					break;
				list = l;
				cap *= 2;
			}
			struct rnic_device *dev = find_or_add(name, socket);
			if (!dev)
				break;
			dev->gone = 0;
			dev->refs++;
			list[n++] = &dev->ibdev;
		}
		closedir(d);
	}
	for (struct rnic_device *d = devices, *next; d; d = next) {
		next = d->next;
		if (d->gone && d->refs == 0)
			unlink_free(d);
	}
	pthread_mutex_unlock(&devices_lock);
	qsort(list, n, sizeof *list, cmp_dev);
	list[n] = NULL;
	if (num)
		*num = n;
	return list;
}

void ibv_free_device_list(struct ibv_device **list)
{
	if (!list)
		return;
	for (struct ibv_device **p = list; *p; p++)
		rnic_device_put(*p);
	free(list);
}

const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

/* The node GUID: the modified EUI-64 of the port's link-local GID (GID
 * index 0), as rxe derives it from the netdev's MAC. */
__be64 ibv_get_device_guid(struct ibv_device *device)
{
	struct rnic_device *dev = (struct rnic_device *)device;
	uint8_t gid[16];
	uint64_t guid = 0;
	int fd = hostif_connect(dev->socket);
	if (fd < 0)
		return 0;
	if (hostif_hello(fd) == 0 && hostif_query_gid(fd, 1, 0, gid) == 0)
		memcpy(&guid, gid + 8, 8); /* already in network order */
	close(fd);
	return guid;
}
