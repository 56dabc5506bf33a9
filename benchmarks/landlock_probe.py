import ctypes, os, platform
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
print("kernel", platform.release(), "landlock abi", r, "errno", ctypes.get_errno())
