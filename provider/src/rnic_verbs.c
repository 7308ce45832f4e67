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
	DIR *d = opendir(dir);
	if (d) {
		struct dirent *e;
		while ((e = readdir(d))) {
			size_t len = strlen(e->d_name);
			if (len <= 5 || strcmp(e->d_name + len - 5, ".sock") || len - 5 >= IBV_SYSFS_NAME_MAX)
				continue;
			struct rnic_device *dev = calloc(1, sizeof *dev);
			if (!dev)
				break;
			if ((size_t)snprintf(dev->socket, sizeof dev->socket, "%s/%s", dir, e->d_name) >= sizeof dev->socket) {
				free(dev);
				continue;
			}
			int fd = hostif_connect(dev->socket);
			if (fd < 0) { /* a stale socket: its NIC is gone */
				free(dev);
				continue;
			}
			close(fd);
			memcpy(dev->ibdev.name, e->d_name, len - 5);
			memcpy(dev->ibdev.dev_name, dev->ibdev.name, sizeof dev->ibdev.dev_name); /* no uverbs device: its own name */
			dev->ibdev.node_type = IBV_NODE_CA;
			dev->ibdev.transport_type = IBV_TRANSPORT_IB;
			if (n == cap) {
				struct ibv_device **l = realloc(list, (2 * cap + 1) * sizeof *list);
				if (!l) {
					free(dev);
					break;
				}
				list = l;
				cap *= 2;
			}
			list[n++] = &dev->ibdev;
		}
		closedir(d);
	}
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
		free(*p);
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
