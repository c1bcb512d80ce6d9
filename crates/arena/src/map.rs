//! The mapping itself: the only place in Larder that touches shared memory through raw
//! pointers.
//!
//! # Invariants
//!
//! - The mapping is `MAP_SHARED` over a file descriptor (memfd, `/dev/shm`, or a plain file)
//!   and stays mapped, at a fixed length, for the life of [`Mapping`]; it never moves or shrinks.
//! - Every access is bounds-checked against that length (and, for atomics, alignment-checked)
//!   before a pointer is formed. An offset read from the arena may have been written by a buggy
//!   process, so nothing here trusts one.
//! - No `&[u8]` or `&mut T` is ever formed over arena bytes: other processes may be writing
//!   them. Bytes are copied in and out with raw-pointer copies; fixed-size fields are reached
//!   only through atomic types, which permit shared mutation by design.
//!
//! Everything above this module works with offsets and the safe accessors below.

use std::fs::File;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};

use crate::Error;

pub(crate) struct Mapping {
    base: *mut u8,
    len: u64,
    /// The size of the huge pages the kernel may back this mapping with (see
    /// [`Mapping::new`]), or 0 when it uses base pages only.
    huge_page: u64,
    /// A table of u32 words declared once by [`Mapping::set_table`] (offset, words): the
    /// allocator's page descriptors, read on every allocation and free.
    table: (u64, u64),
    _map: memmap2::MmapRaw,
}

/// The size of a transparent huge page on x86-64 (and arm64 with 4 KiB pages), used where
/// the kernel does not say (`hpage_pmd_size`).
const HUGE_PAGE: u64 = 2 << 20;

// SAFETY: the mapping is plain shared memory; all access goes through atomics or
// bounds-checked raw copies, which are safe to perform from any thread.
unsafe impl Send for Mapping {}
// SAFETY: as above; no method hands out a non-atomic reference into the mapping.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `file` shared and writable.
    pub(crate) fn new(file: &File, len: u64) -> Result<Mapping, Error> {
        let map = memmap2::MmapOptions::new()
            .len(usize::try_from(len).map_err(|_| Error::Geometry("capacity too large"))?)
            .map_raw(file)
            .map_err(Error::Io)?;
        // Ask for transparent huge pages: a lookup touches a bucket and an item at random,
        // and with 4 KiB pages each is likely a TLB miss too. Only effective where the
        // kernel allows huge pages for shared memory: for memfd (the anonymous backing),
        // /sys/kernel/mm/transparent_hugepage/shmem_enabled = advise or within_size; for
        // /dev/shm, its tmpfs mounted with huge=advise or within_size. Elsewhere (Debian's
        // default, a file on ext4) it is ignored.
        // SAFETY: the range is exactly the mapping just created; MADV_HUGEPAGE changes only
        // how the kernel backs it, never its contents.
        let _ =
            unsafe { rustix::mm::madvise(map.as_mut_ptr().cast(), len as usize, rustix::mm::Advice::LinuxHugepage) };
        // Whether it took: then `discard` must keep to whole huge pages. Skipped for a
        // mapping smaller than one (the header a process peeks at before attaching).
        let size = huge_page_size();
        let huge_page = if len >= size && thp_eligible(map.as_mut_ptr() as usize) { size } else { 0 };
        Ok(Mapping { base: map.as_mut_ptr(), len, huge_page, table: (0, 0), _map: map })
    }

    /// The size of the transparent huge pages the kernel may back this mapping with, or 0.
    /// "May": the mapping is eligible for them (`THPeligible`); where a huge page cannot be
    /// had at a fault, the kernel falls back to base pages for that range.
    pub(crate) fn huge_page(&self) -> u64 {
        self.huge_page
    }

    #[inline]
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Declares the table [`Mapping::table_u32`] reads: `words` u32s from `off`, checked
    /// here, once, to lie in the mapping and be aligned.
    pub(crate) fn set_table(&mut self, off: u64, words: u64) -> Result<(), Error> {
        self.check(off, words.checked_mul(4).ok_or(Error::OutOfRange { off, size: words })?, 4)?;
        self.table = (off, words);
        Ok(())
    }

    /// Word `i` of the table declared by [`Mapping::set_table`], or None past its end: one
    /// comparison, where [`Mapping::u32`] checks alignment, overflow and the mapping's end.
    #[inline]
    pub(crate) fn table_u32(&self, i: u64) -> Option<&AtomicU32> {
        if i < self.table.1 {
            // SAFETY: set_table checked that all the table's words lie inside the live
            // mapping and are 4-aligned, and i is below their count. AtomicU32 permits
            // shared mutation.
            Some(unsafe { &*(self.base.add((self.table.0 + i * 4) as usize) as *const AtomicU32) })
        } else {
            None
        }
    }

    #[inline]
    fn check(&self, off: u64, size: u64, align: u64) -> Result<(), Error> {
        match off.checked_add(size) {
            Some(end) if end <= self.len && off.is_multiple_of(align) => Ok(()),
            _ => Err(Error::OutOfRange { off, size }),
        }
    }

    #[inline]
    pub(crate) fn u64(&self, off: u64) -> Result<&AtomicU64, Error> {
        self.check(off, 8, 8)?;
        // SAFETY: off..off+8 is inside the live mapping and 8-aligned (checked above; the
        // mapping base is page-aligned). AtomicU64 has the layout of u64 and allows shared
        // mutation, so a shared reference is sound even while other processes write.
        Ok(unsafe { &*(self.base.add(off as usize) as *const AtomicU64) })
    }

    #[inline]
    pub(crate) fn u32(&self, off: u64) -> Result<&AtomicU32, Error> {
        self.check(off, 4, 4)?;
        // SAFETY: in bounds and 4-aligned (checked); AtomicU32 permits shared mutation.
        Ok(unsafe { &*(self.base.add(off as usize) as *const AtomicU32) })
    }

    /// `N` consecutive `u32` words (an index bucket, say) with one bounds check.
    #[inline]
    pub(crate) fn u32s<const N: usize>(&self, off: u64) -> Result<&[AtomicU32; N], Error> {
        self.check(off, 4 * N as u64, 4)?;
        // SAFETY: off..off+4N is inside the live mapping and 4-aligned (checked above);
        // [AtomicU32; N] has the layout of [u32; N] and permits shared mutation.
        Ok(unsafe { &*(self.base.add(off as usize) as *const [AtomicU32; N]) })
    }

    #[inline]
    pub(crate) fn u8(&self, off: u64) -> Result<&AtomicU8, Error> {
        self.check(off, 1, 1)?;
        // SAFETY: in bounds (checked); AtomicU8 permits shared mutation and has no alignment.
        Ok(unsafe { &*(self.base.add(off as usize) as *const AtomicU8) })
    }

    /// Copies `out.len()` bytes from the arena at `off` into `out`.
    #[inline]
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> Result<(), Error> {
        self.check(off, out.len() as u64, 1)?;
        // SAFETY: the source range is inside the mapping (checked) and `out` is a distinct
        // process-local buffer, so the ranges cannot overlap. A concurrent writer can only
        // make the copied bytes stale, which callers handle (published items are immutable).
        unsafe { std::ptr::copy_nonoverlapping(self.base.add(off as usize), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Appends `len` bytes from the arena at `off` to `out`.
    #[inline]
    pub(crate) fn read_append(&self, off: u64, len: usize, out: &mut Vec<u8>) -> Result<(), Error> {
        self.check(off, len as u64, 1)?;
        out.reserve(len);
        let start = out.len();
        // SAFETY: source in bounds (checked); destination is the reserved spare capacity of
        // `out`, which is at least `len` bytes and cannot overlap the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(off as usize), out.as_mut_ptr().add(start), len);
            out.set_len(start + len);
        }
        Ok(())
    }

    /// Copies `data` into the arena at `off`. Callers only write memory they own and have not
    /// yet published (invariant 2), or fixed fields through atomics instead.
    #[inline]
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> Result<(), Error> {
        self.check(off, data.len() as u64, 1)?;
        // SAFETY: destination in bounds (checked); `data` is process-local memory, so the
        // ranges cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.base.add(off as usize), data.len()) };
        Ok(())
    }

    /// Copies `parts` back to back into the arena at `off`, with one bounds check for the
    /// whole range. Meant for building a small item (header, key, value): parts of up to
    /// 32 bytes are copied inline rather than through a `memcpy` call each. Same rules as
    /// [`Mapping::write`].
    #[inline(always)]
    pub(crate) fn write_parts<const N: usize>(&self, off: u64, parts: [&[u8]; N]) -> Result<(), Error> {
        let total = parts.iter().try_fold(0u64, |t, p| t.checked_add(p.len() as u64));
        let Some(total) = total else { return Err(Error::OutOfRange { off, size: u64::MAX }) };
        self.check(off, total, 1)?;
        let mut at = off as usize;
        for p in parts {
            // SAFETY: at..at + p.len() lies inside off..off + total, which is inside the
            // mapping (checked above); `p` is process-local memory, so the ranges cannot
            // overlap.
            unsafe { copy_small(p.as_ptr(), self.base.add(at), p.len()) };
            at += p.len();
        }
        Ok(())
    }

    /// Copies `len` bytes inside the arena (ranges may not overlap).
    #[inline]
    pub(crate) fn copy(&self, src: u64, dst: u64, len: u64) -> Result<(), Error> {
        self.check(src, len, 1)?;
        self.check(dst, len, 1)?;
        if src < dst + len && dst < src + len && len > 0 {
            return Err(Error::OutOfRange { off: dst, size: len });
        }
        // SAFETY: both ranges are inside the mapping and disjoint (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(src as usize), self.base.add(dst as usize), len as usize)
        };
        Ok(())
    }

    /// Whether the arena bytes at `off` equal `data`. Compares eight bytes at a time: the
    /// arena's are loaded with unaligned word reads (copies, never a slice over shared memory).
    #[inline]
    pub(crate) fn eq(&self, off: u64, data: &[u8]) -> Result<bool, Error> {
        self.check(off, data.len() as u64, 1)?;
        let n = data.len();
        let at = |i: usize| -> (u64, u64) {
            debug_assert!(i + 8 <= n);
            // SAFETY: i + 8 <= n, so both 8-byte reads lie inside off..off+n (checked above,
            // inside the mapping) and inside `data`; read_unaligned has no alignment needs.
            unsafe {
                (
                    std::ptr::read_unaligned(self.base.add(off as usize + i) as *const u64),
                    std::ptr::read_unaligned(data.as_ptr().add(i) as *const u64),
                )
            }
        };
        if n < 8 {
            // SAFETY: i < n, so the byte at off + i is inside the checked range.
            return Ok((0..n).all(|i| unsafe { self.base.add(off as usize + i).read() } == data[i]));
        }
        let mut i = 0;
        while i + 8 < n {
            let (x, y) = at(i);
            if x != y {
                return Ok(false);
            }
            i += 8;
        }
        // The last eight bytes (overlapping the previous word when n is not a multiple of 8).
        let (x, y) = at(n - 8);
        Ok(x == y)
    }

    /// Hints the CPU to fetch the cache line at `off` (out of range: nothing happens).
    #[inline]
    pub(crate) fn prefetch(&self, off: u64) {
        if off < self.len {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the address is inside the mapping (checked); a prefetch never faults and
            // has no effect on memory contents.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    self.base.add(off as usize) as *const i8
                )
            };
        }
    }

    /// Zeroes `len` bytes at `off`.
    pub(crate) fn zero(&self, off: u64, len: u64) -> Result<(), Error> {
        self.check(off, len, 1)?;
        // SAFETY: in bounds (checked).
        unsafe { std::ptr::write_bytes(self.base.add(off as usize), 0, len as usize) };
        Ok(())
    }

    /// Tells the kernel the pages in `off..off+len` may be dropped (they read back as zero,
    /// or keep their bytes where a huge page is kept whole: callers never rely on either).
    /// Used to give freed large runs back; a failure only means memory is not returned.
    ///
    /// On a mapping with huge pages, only the whole huge pages inside the range go: removing
    /// part of one splits it for good (the kernel refills the hole with 4 KiB pages), and the
    /// index's segments, freed and reused at every split, would turn a table of huge pages
    /// into one of small pages as it grows.
    pub(crate) fn discard(&self, off: u64, len: u64) -> Result<(), Error> {
        self.check(off, len, 4096)?;
        if !len.is_multiple_of(4096) {
            return Err(Error::OutOfRange { off, size: len });
        }
        let whole = if self.huge_page != 0 { whole_huge_pages(off, len, self.huge_page) } else { Some((off, len)) };
        let Some((off, len)) = whole else {
            return Ok(());
        };
        // SAFETY: the range is inside our own shared mapping and page-aligned (checked);
        // MADV_REMOVE on a shared mapping only frees the backing pages, which then read as
        // zero for every process; callers only discard memory nobody references.
        let _ = unsafe {
            rustix::mm::madvise(self.base.add(off as usize).cast(), len as usize, rustix::mm::Advice::LinuxRemove)
        };
        Ok(())
    }
}

/// The whole huge pages of `size` bytes inside `off..off+len`, if any. Offsets in the file
/// are what the kernel aligns huge pages to, and arena offsets are file offsets.
pub(crate) fn whole_huge_pages(off: u64, len: u64, size: u64) -> Option<(u64, u64)> {
    let first = off.checked_next_multiple_of(size)?;
    let end = (off + len) / size * size;
    (end > first).then(|| (first, end - first))
}

/// The kernel's PMD-sized transparent huge page (2 MiB on x86-64; 32 MiB or 512 MiB on arm64
/// with 16 or 64 KiB base pages), or 2 MiB where sysfs does not say.
fn huge_page_size() -> u64 {
    std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .filter(|s| s.is_power_of_two() && *s >= 4096)
        .unwrap_or(HUGE_PAGE)
}

/// Whether the kernel will back the mapping that starts at `addr` with transparent huge
/// pages: its `THPeligible` line in `/proc/self/smaps`. Read once per mapping; false where
/// the file or the line is missing (old kernels, no procfs).
fn thp_eligible(addr: usize) -> bool {
    std::fs::read_to_string("/proc/self/smaps").is_ok_and(|smaps| smaps_thp_eligible(&smaps, addr))
}

/// [`thp_eligible`] over the text of an smaps file.
fn smaps_thp_eligible(smaps: &str, addr: usize) -> bool {
    smaps_entry(smaps, addr)
        .is_some_and(|mut e| e.any(|l| l.strip_prefix("THPeligible:").is_some_and(|v| v.trim() == "1")))
}

/// The field lines of the smaps entry of the mapping that starts at `addr`: those after its
/// header line ("start-end perms offset dev inode path") up to the next header.
fn smaps_entry(smaps: &str, addr: usize) -> Option<impl Iterator<Item = &str>> {
    let head = format!("{addr:x}-");
    let mut lines = smaps.lines().skip_while(move |l| !l.starts_with(&head));
    lines.next()?;
    let is_header = |l: &str| {
        l.split(' ').next().is_some_and(|w| w.contains('-') && w.bytes().all(|b| b == b'-' || b.is_ascii_hexdigit()))
    };
    Some(lines.take_while(move |l| !is_header(l)))
}

/// Nanoseconds on CLOCK_MONOTONIC, which every process on the machine shares (the clock
/// `std::time::Instant` reads). A plain integer, so that the server's per-command timing is
/// a subtraction, not `Instant`'s checked `Timespec` arithmetic (about 60 instructions a
/// command under callgrind).
///
/// Through libc rather than rustix: rustix reads the vDSO itself, which valgrind cannot
/// follow (rustix issue #1559: callgrind aborts on the first call), and instruction counts
/// under callgrind are how this project judges a change.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec for the call; CLOCK_MONOTONIC exists on
    // every Linux this runs on (on failure `ts` stays zero).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Milliseconds on CLOCK_MONOTONIC (see [`monotonic_ns`]).
pub(crate) fn monotonic_ms() -> u64 {
    monotonic_ns() / 1_000_000
}

/// Open-file-description locks on single bytes of the arena's file (`F_OFD_SETLK`,
/// `F_OFD_GETLK`): how a participant shows it is alive (see `participant.rs`). They belong to
/// the open file description, not to a process or pid, so they mean the same thing in every
/// pid namespace, and the kernel drops them when the last descriptor of that description
/// closes, which a process's death does. They are advisory: the mapping's bytes are
/// untouched by them.
pub(crate) mod ofd {
    use std::io;
    use std::os::fd::{AsRawFd, BorrowedFd};

    fn request(kind: libc::c_int, byte: u64) -> libc::flock {
        // SAFETY: `flock` is a plain C struct of integers, for which all-zero is a valid value
        // (it may have private padding fields, so it is not built with a literal).
        let mut f: libc::flock = unsafe { std::mem::zeroed() };
        f.l_type = kind as _;
        f.l_whence = libc::SEEK_SET as _;
        f.l_start = byte as _;
        f.l_len = 1;
        f // l_pid stays 0, as OFD requests require
    }

    fn fcntl(fd: BorrowedFd<'_>, cmd: libc::c_int, f: &mut libc::flock) -> io::Result<()> {
        // SAFETY: `fd` is an open descriptor for the call's duration (borrowed), and `f` is a
        // valid, exclusively borrowed `flock` the kernel reads and, for F_OFD_GETLK, writes.
        if unsafe { libc::fcntl(fd.as_raw_fd(), cmd, f as *mut libc::flock) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Takes a write lock on `byte` for `fd`'s open file description without waiting.
    /// `Ok(false)`: another description holds it.
    pub(crate) fn try_lock(fd: BorrowedFd<'_>, byte: u64) -> io::Result<bool> {
        match fcntl(fd, libc::F_OFD_SETLK, &mut request(libc::F_WRLCK, byte)) {
            Ok(()) => Ok(true),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES)) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Releases `fd`'s lock on `byte`, if it holds one.
    pub(crate) fn unlock(fd: BorrowedFd<'_>, byte: u64) -> io::Result<()> {
        fcntl(fd, libc::F_OFD_SETLK, &mut request(libc::F_UNLCK, byte))
    }

    /// Whether an open file description other than `fd`'s holds a lock on `byte`.
    pub(crate) fn held_by_other(fd: BorrowedFd<'_>, byte: u64) -> io::Result<bool> {
        let mut f = request(libc::F_WRLCK, byte);
        fcntl(fd, libc::F_OFD_GETLK, &mut f)?;
        Ok(f.l_type as libc::c_int != libc::F_UNLCK)
    }

    use std::os::fd::{AsFd, IntoRawFd, OwnedFd, RawFd};
    use std::sync::atomic::{AtomicI32, Ordering};

    /// Descriptors that hold liveness locks in this process, as fd + 1 (0: empty entry).
    /// A child forked without exec would otherwise share their descriptions, keeping a dead
    /// parent's slots "alive" for as long as it runs; the fork handler below lets go of them.
    static REGISTRY: [AtomicI32; 4096] = [const { AtomicI32::new(0) }; 4096];

    /// A descriptor whose description holds (or may take) liveness locks, listed in
    /// [`REGISTRY`] for its lifetime. If the registry is full it is simply not listed: a
    /// child forked then keeps its locks held until it exits or execs.
    pub(crate) struct LockFd {
        fd: OwnedFd,
        entry: Option<usize>,
    }

    impl LockFd {
        pub(crate) fn new(fd: OwnedFd) -> LockFd {
            install_fork_handler();
            let v = fd.as_raw_fd() + 1;
            let entry =
                REGISTRY.iter().position(|e| e.compare_exchange(0, v, Ordering::AcqRel, Ordering::Relaxed).is_ok());
            LockFd { fd, entry }
        }
    }

    impl AsFd for LockFd {
        fn as_fd(&self) -> BorrowedFd<'_> {
            self.fd.as_fd()
        }
    }

    impl Drop for LockFd {
        fn drop(&mut self) {
            if let Some(i) = self.entry {
                REGISTRY[i].store(0, Ordering::Release);
            }
            // Then `fd` closes, releasing the locks if no other descriptor shares them.
        }
    }

    /// /dev/null, opened (close-on-exec) when the fork handler is installed, so that a child
    /// needs no new descriptor to let go (it may be at its descriptor limit), and the device
    /// and inode it had then: a process that closes every descriptor may have reused the
    /// number for something else since.
    static NULL: AtomicI32 = AtomicI32::new(-1);
    static NULL_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    fn file_id(fd: RawFd) -> Option<u64> {
        // SAFETY: fstat writes only into the zeroed struct we pass; an invalid fd is an
        // error, not undefined behaviour. Async-signal-safe.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            return None;
        }
        Some((st.st_rdev as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ st.st_ino as u64)
    }

    /// Points every descriptor listed in `registry` at /dev/null instead (so its number stays
    /// valid for whoever closes it later), which drops this process's share of the
    /// description and with it, if it was the last, the description's locks. Uses only
    /// async-signal-safe calls: it runs in a freshly forked child.
    ///
    /// A descriptor being opened or closed by another thread while the process forks may be
    /// copied into the child unlisted; the child then holds its byte until it exits or
    /// execs (a live owner's byte, or a freed slot's: the slot stays unclaimable that long).
    /// So may every descriptor of a child made without fork handlers (`_Fork`, raw `clone`),
    /// and one the child cannot dup3 onto.
    pub(crate) fn let_go(registry: &[AtomicI32]) {
        let mut null = NULL.load(Ordering::Acquire);
        let mut opened = false;
        if null < 0 || file_id(null) != Some(NULL_ID.load(Ordering::Acquire)) {
            // The inherited /dev/null is gone or its number reused: open one here.
            opened = true;
            // SAFETY: open with a NUL-terminated path; the result is checked.
            null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
            if null < 0 {
                return;
            }
        }
        for e in registry {
            let v: RawFd = e.load(Ordering::Acquire);
            if v > 0 && v - 1 != null {
                // SAFETY: dup3 onto a descriptor this process owns (listed while open); it
                // replaces it atomically and touches no memory.
                unsafe { libc::dup3(null, v - 1, libc::O_CLOEXEC) };
            }
        }
        if opened {
            // SAFETY: opened above by this call and not used again.
            unsafe { libc::close(null) };
        }
    }

    extern "C" fn in_forked_child() {
        let_go(&REGISTRY);
    }

    fn install_fork_handler() {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if let Ok(f) = std::fs::File::open("/dev/null") {
                let fd = OwnedFd::from(f).into_raw_fd(); // kept for good
                NULL_ID.store(file_id(fd).unwrap_or(0), Ordering::Release);
                NULL.store(fd, Ordering::Release);
            }
            // SAFETY: registers a handler that only does async-signal-safe work (see let_go),
            // as a handler run in a forked child must; it is installed once.
            unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
        });
    }

    /// Points the number of the fork handler's /dev/null at `fd`'s description instead, as a
    /// process that closed every descriptor and opened new ones might have; returns it.
    #[cfg(test)]
    pub(crate) fn reuse_null_number_for_tests(fd: BorrowedFd<'_>) -> RawFd {
        install_fork_handler();
        let null = NULL.load(Ordering::Acquire);
        // SAFETY: dup3 onto the number this module opened and keeps; touches no memory.
        assert_eq!(unsafe { libc::dup3(fd.as_raw_fd(), null, libc::O_CLOEXEC) }, null);
        null
    }

    /// Forks a child that sleeps `secs` seconds and exits, running the fork handlers;
    /// returns its pid. For tests of what a child keeps.
    #[cfg(test)]
    pub(crate) fn fork_sleeping_child_for_tests(secs: u32) -> libc::pid_t {
        // SAFETY: the child only calls async-signal-safe functions (nanosleep, _exit) before
        // it ends, as a child of a multithreaded process must.
        unsafe {
            let pid = libc::fork();
            if pid == 0 {
                let t = libc::timespec { tv_sec: secs as _, tv_nsec: 0 };
                libc::nanosleep(&t, std::ptr::null_mut());
                libc::_exit(0);
            }
            pid
        }
    }
}

/// `copy_nonoverlapping(src, dst, n)`, with copies of up to 32 bytes done inline as two
/// fixed-size (possibly overlapping) moves: for the short keys and values of typical items
/// a `memcpy` call costs more than the copy.
///
/// # Safety
/// As for `copy_nonoverlapping`: `src..src + n` readable, `dst..dst + n` writable, disjoint.
#[inline(always)]
unsafe fn copy_small(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY (every arm): each fixed-size move reads and writes a sub-range of
    // `0..n` of the source and destination (the caller's ranges); an overlap between the
    // two moves of one arm only writes the same bytes twice.
    unsafe {
        match n {
            16..=32 => {
                std::ptr::copy_nonoverlapping(src, dst, 16);
                std::ptr::copy_nonoverlapping(src.add(n - 16), dst.add(n - 16), 16);
            }
            8..=15 => {
                std::ptr::copy_nonoverlapping(src, dst, 8);
                std::ptr::copy_nonoverlapping(src.add(n - 8), dst.add(n - 8), 8);
            }
            4..=7 => {
                std::ptr::copy_nonoverlapping(src, dst, 4);
                std::ptr::copy_nonoverlapping(src.add(n - 4), dst.add(n - 4), 4);
            }
            0..=3 => {
                for i in 0..n {
                    *dst.add(i) = *src.add(i);
                }
            }
            _ => std::ptr::copy_nonoverlapping(src, dst, n),
        }
    }
}

#[cfg(test)]
mod huge_tests {
    use super::*;

    #[test]
    fn whole_huge_pages_keeps_inside_the_range() {
        const H: u64 = HUGE_PAGE;
        let whole = |off, len| whole_huge_pages(off, len, H);
        // Smaller than a huge page, or straddling a boundary without covering one: nothing.
        assert_eq!(whole(4096, 60 * 1024), None);
        assert_eq!(whole(H - 4096, 8192), None);
        assert_eq!(whole(H + 4096, H - 4096 - 4096), None);
        // Exactly one.
        assert_eq!(whole(H, H), Some((H, H)));
        // A run that keeps its first 4 KiB page (as purges do) and ends mid-page.
        assert_eq!(whole(4096, 3 * H), Some((H, 2 * H)));
        assert_eq!(whole(H + 4096, 3 * H), Some((2 * H, 2 * H)));
        // Another size (arm64 with 16 KiB base pages).
        assert_eq!(whole_huge_pages(4096, 64 << 20, 32 << 20), Some((32 << 20, 32 << 20)));
    }

    const SMAPS: &str = "\
55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
Size:                132 kB
THPeligible:           1
VmFlags: rd wr mr mw me ac
7f1303000000-7f1343000000 rw-s 00000000 00:1b 464                        /dev/shm/larder-x
Size:            1048576 kB
KernelPageSize:        4 kB
ShmemPmdMapped:        0 kB
THPeligible:           0
VmFlags: rd wr sh mr mw me ms hg
7f1343000000-7f1383000000 rw-s 00000000 00:01 99                         /memfd:larder (deleted)
Size:            1048576 kB
ShmemPmdMapped:     2048 kB
THPeligible:           1
VmFlags: rd wr sh mr mw me ms hg
7f1383000000-7f1383001000 r--p 00000000 00:00 0
Size:                  4 kB
VmFlags: rd mr mw me
7f1383001000-7f1383002000 r--p 00000000 00:00 0
Size:                  4 kB
THPeligible:           1
";

    #[test]
    fn smaps_thp_eligible_reads_the_mapping_asked_for() {
        assert!(!smaps_thp_eligible(SMAPS, 0x7f13_0300_0000));
        assert!(smaps_thp_eligible(SMAPS, 0x7f13_4300_0000));
        assert!(smaps_thp_eligible(SMAPS, 0x55d0_c0a0_0000));
        // No line of its own: the next mapping's line is not taken for it.
        assert!(!smaps_thp_eligible(SMAPS, 0x7f13_8300_0000));
        // Not mapped at all, or only an end address that matches.
        assert!(!smaps_thp_eligible(SMAPS, 0x1000));
        assert!(!smaps_thp_eligible(SMAPS, 0x7f13_8300_2000));
    }

    #[test]
    fn a_live_mapping_is_found_in_smaps() {
        // Whatever the machine allows, the mapping's own entry is what is read.
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage").exists() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let fd = rustix::fs::memfd_create("larder-thp-test", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
        let file = File::from(fd);
        file.set_len(2 * HUGE_PAGE).unwrap();
        let m = Mapping::new(&file, 2 * HUGE_PAGE).unwrap();
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let entry: Vec<&str> =
            smaps_entry(&smaps, m.base as usize).expect("the mapping is in /proc/self/smaps").collect();
        assert!(entry.iter().any(|l| l.starts_with("Size:") && l.ends_with(" 4096 kB")), "{entry:?}");
        assert!(
            !entry.iter().any(|l| l.starts_with("VmFlags:") && !l.contains(" hg")),
            "MADV_HUGEPAGE was asked for: {entry:?}"
        );
        let line = entry.iter().find(|l| l.starts_with("THPeligible:")).expect("kernels since 5.0 print THPeligible");
        assert_eq!(m.huge_page() != 0, line.ends_with('1'), "{line}");
        // A discard of part of it is always accepted, whatever it gives back.
        m.write(0, &[7; 4096]).unwrap();
        m.discard(4096, HUGE_PAGE).unwrap();
        m.discard(0, 2 * HUGE_PAGE).unwrap();
    }
}
