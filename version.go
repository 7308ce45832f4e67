package rnic

// Version is the version of this module, in semantic versioning: the
// release the code is, or the next one with a "-dev" suffix between
// releases. "rnic --version" prints it; CHANGELOG.md says what each
// release changed. A program can log it beside its devices' counters to
// say which NIC produced them.
const Version = "0.2.0-dev"
