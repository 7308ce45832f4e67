// Package host is the host server: it serves the verbs of other local
// processes on a device (Serve), as the kernel's uverbs serves a
// device's verbs to user space. It sits on the device layer beside the
// NIC, under the programs' libibverbs provider (provider/, the C library
// rnic exec loads) and beside the CM's server (package cm), and drives
// the NIC through the verbs layer (package rnic), as uverbs drives
// ib_core: the checks and state machines of the verbs exist once.
//
// A program's connection is its uverbs file: the control path
// (internal/hostif's commands over a unixpacket socket: PDs, regions of
// the program's memory, CQs, QPs, SRQs, AHs, MWs, async events) and the
// data path's set-up. Its queues are rings in shared memory, in the one
// format of internal/queue, which are the engine's queues themselves
// (transport.RingMem, transport.CQMem): nothing here copies a WQE or a
// CQE. Its doorbells are words of a doorbell page the NIC's engine
// goroutine scans (doorbells, a nic.DoorbellRecords); the program writes
// an eventfd only when the page says the NIC sleeps. Its memory is
// reached with process_vm_readv/writev (internal/hw/bus).
//
// The verbs layer's calls that are not public (objects on a program's
// rings, regions of another process) come through device.Host.
package host
