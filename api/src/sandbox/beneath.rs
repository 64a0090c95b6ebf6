//! Files beneath a directory, opened through a handle on it: every path an
//! agent names relative to its workspace, and every key of the local object
//! store, goes through [`Beneath`]. Each path is resolved by the kernel with
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`, so a link swapped in
//! between a check and an open (the race a background process can win) is
//! refused at the open itself; where `openat2` is missing (Linux before 5.6,
//! or a seccomp profile that answers `ENOSYS`), each component is opened
//! with `O_NOFOLLOW` relative to the previous one instead. Renames, links and
//! removals act on one name inside a parent opened the same way.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// Cleared once `openat2` answered `ENOSYS`: the component walk from then on.
static OPENAT2: AtomicBool = AtomicBool::new(true);
/// `openat2` answers `EAGAIN` when a rename elsewhere raced its lookup.
const EAGAIN_RETRIES: usize = 8;
const DIR_MODE: u32 = 0o755;
const FILE_MODE: u32 = 0o644;

/// What a name beneath the root is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    /// A symbolic link (never followed), a device, a FIFO or a socket.
    Other,
}

/// One entry of [`Beneath::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub kind: Kind,
    /// A regular file's size and modification time (`None` for anything else).
    pub file: Option<FileStat>,
}

/// What a listing tells of a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStat {
    pub size: u64,
    /// Nanoseconds since the epoch.
    pub modified: u128,
}

impl FileStat {
    fn of(stat: &rustix::fs::Stat) -> Self {
        let secs = u128::try_from(stat.st_mtime).unwrap_or(0);
        Self {
            size: u64::try_from(stat.st_size).unwrap_or(0),
            modified: secs * 1_000_000_000 + u128::from(stat.st_mtime_nsec),
        }
    }
}

/// A handle on a directory; every path given to it stays beneath it.
#[derive(Debug)]
pub struct Beneath {
    root: OwnedFd,
}

/// Whether this kernel resolves paths with `openat2` (else the `O_NOFOLLOW` walk).
pub fn openat2_available() -> bool {
    let Ok(root) = rustix::fs::open(
        "/",
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return false;
    };
    match rustix::fs::openat2(
        &root,
        ".",
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        resolve_flags(),
    ) {
        Ok(_) => OPENAT2.load(Ordering::Relaxed),
        Err(_) => false,
    }
}

fn resolve_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message)
}

/// The components of `relative`: no absolute path, no `..`, no NUL (`.` and
/// empty components are dropped, so `""` and `"."` are the root itself).
fn components(relative: &str) -> io::Result<Vec<&str>> {
    if relative.contains('\0') {
        return Err(invalid(format!("{relative:?} contains a NUL byte")));
    }
    if relative.starts_with('/') {
        return Err(invalid(format!("{relative:?} is absolute")));
    }
    let parts: Vec<&str> = relative
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.contains(&"..") {
        return Err(invalid(format!("{relative:?} contains \"..\"")));
    }
    Ok(parts)
}

/// Opens `parts` beneath `dir` without following any link.
fn open_parts(dir: BorrowedFd<'_>, parts: &[&str], flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let flags = flags | OFlags::CLOEXEC;
    if parts.is_empty() {
        return Ok(rustix::fs::openat(dir, ".", flags, mode)?);
    }
    if OPENAT2.load(Ordering::Relaxed) {
        let path = parts.join("/");
        for _ in 0..EAGAIN_RETRIES {
            match rustix::fs::openat2(dir, path.as_str(), flags, mode, resolve_flags()) {
                Err(Errno::AGAIN) => continue,
                Err(Errno::NOSYS) => {
                    OPENAT2.store(false, Ordering::Relaxed);
                    break;
                }
                other => return Ok(other?),
            }
        }
        if OPENAT2.load(Ordering::Relaxed) {
            return Err(Errno::AGAIN.into());
        }
    }
    walk(dir, parts, flags, mode)
}

/// The fallback: each directory opened `O_NOFOLLOW` relative to the last.
fn walk(dir: BorrowedFd<'_>, parts: &[&str], flags: OFlags, mode: Mode) -> io::Result<OwnedFd> {
    let Some((last, dirs)) = parts.split_last() else {
        return Ok(rustix::fs::openat(dir, ".", flags, mode)?);
    };
    let mut current: Option<OwnedFd> = None;
    for part in dirs {
        let base = current.as_ref().map_or(dir, |fd| fd.as_fd());
        current = Some(step_into(base, part)?);
    }
    let base = current.as_ref().map_or(dir, |fd| fd.as_fd());
    Ok(rustix::fs::openat(base, *last, flags | OFlags::NOFOLLOW, mode)?)
}

/// Opens the folder `name` in `dir`, refusing a link there.
fn step_into(dir: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        // A link where a folder should be: the same refusal as openat2's.
        Err(Errno::NOTDIR) if is_symlink(dir, name) => Err(Errno::LOOP.into()),
        other => Ok(other?),
    }
}

fn is_symlink(dir: BorrowedFd<'_>, name: &str) -> bool {
    rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|stat| FileType::from_raw_mode(stat.st_mode) == FileType::Symlink)
}

fn kind_of(file_type: FileType) -> Kind {
    match file_type {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        _ => Kind::Other,
    }
}

fn not_a_file(what: &str) -> io::Error {
    invalid(format!("{what} is not a regular file"))
}

impl Beneath {
    /// Opens `parts` beneath the root (see [`open_parts`]).
    fn open_beneath(&self, parts: &[&str], flags: OFlags) -> io::Result<OwnedFd> {
        open_parts(self.root.as_fd(), parts, flags, Mode::empty())
    }

    /// A handle on `root` (a trusted path: links in it are followed).
    pub fn open(root: &Path) -> io::Result<Self> {
        let fd = rustix::fs::open(
            root,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self { root: fd })
    }

    /// Creates `root` (and its parents) when missing, then opens it.
    pub fn create(root: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        Self::open(root)
    }

    /// A handle on the directory `relative` beneath this one (created when `create`).
    pub fn dir(&self, relative: &str, create: bool) -> io::Result<Self> {
        let parts = components(relative)?;
        if create {
            return self.make_dirs(&parts).map(|root| Self { root });
        }
        let fd = self.open_beneath(&parts, OFlags::PATH | OFlags::DIRECTORY)?;
        Ok(Self { root: fd })
    }

    /// Creates every missing directory of `parts`, one `mkdirat` at a time.
    fn make_dirs(&self, parts: &[&str]) -> io::Result<OwnedFd> {
        let mut current = step_into(self.root.as_fd(), ".")?;
        for part in parts {
            match rustix::fs::mkdirat(&current, *part, Mode::from_raw_mode(DIR_MODE)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(err) => return Err(err.into()),
            }
            current = step_into(current.as_fd(), part)?;
        }
        Ok(current)
    }

    pub fn create_dir_all(&self, relative: &str) -> io::Result<()> {
        self.make_dirs(&components(relative)?).map(drop)
    }

    /// The parent of `relative` (opened, created when `create`) and its last name.
    fn parent<'a>(&self, relative: &'a str, create: bool) -> io::Result<(OwnedFd, &'a str)> {
        let parts = components(relative)?;
        let Some((name, dirs)) = parts.split_last() else {
            return Err(invalid(format!("{relative:?} names no file")));
        };
        let parent = if create {
            self.make_dirs(dirs)?
        } else {
            self.open_beneath(dirs, OFlags::PATH | OFlags::DIRECTORY)?
        };
        Ok((parent, *name))
    }

    /// What `relative` is, without following a link; `None` when it does not exist.
    pub fn kind(&self, relative: &str) -> io::Result<Option<Kind>> {
        let parts = components(relative)?;
        let Some((name, dirs)) = parts.split_last() else {
            return Ok(Some(Kind::Dir));
        };
        let parent = match self.open_beneath(dirs, OFlags::PATH | OFlags::DIRECTORY) {
            Ok(fd) => fd,
            Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(err) => return Err(err),
        };
        match rustix::fs::statat(&parent, *name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(kind_of(FileType::from_raw_mode(stat.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(err) => Err(err.into()),
        }
    }

    /// Opens the regular file `relative` for reading (a FIFO never blocks it).
    fn open_file(&self, relative: &str) -> io::Result<std::fs::File> {
        let parts = components(relative)?;
        let fd = self.open_beneath(&parts, OFlags::RDONLY | OFlags::NONBLOCK)?;
        if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
            return Err(not_a_file(relative));
        }
        Ok(std::fs::File::from(fd))
    }

    /// Up to `limit` bytes of the file `relative`, and its whole size.
    pub fn read_prefix(&self, relative: &str, limit: u64) -> io::Result<(Vec<u8>, u64)> {
        let file = self.open_file(relative)?;
        let size = file.metadata()?.len();
        let mut bytes = Vec::new();
        file.take(limit).read_to_end(&mut bytes)?;
        Ok((bytes, size))
    }

    /// The whole file `relative`.
    pub fn read(&self, relative: &str) -> io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_file(relative)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// The whole file, or `None` when it does not exist.
    pub fn read_optional(&self, relative: &str) -> io::Result<Option<Vec<u8>>> {
        match self.read(relative) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// Creates or truncates the file `relative` (its folders too) with `body`.
    pub fn write(&self, relative: &str, body: &[u8]) -> io::Result<()> {
        let (parent, name) = self.parent(relative, true)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&parent, name, flags, Mode::from_raw_mode(FILE_MODE))?;
        if FileType::from_raw_mode(rustix::fs::fstat(&fd)?.st_mode) != FileType::RegularFile {
            return Err(not_a_file(relative));
        }
        rustix::fs::ftruncate(&fd, 0)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(body)?;
        Ok(())
    }

    /// Creates the file `relative`, which must not exist, with `body`, synced.
    pub fn write_new(&self, relative: &str, body: &[u8]) -> io::Result<()> {
        let (parent, name) = self.parent(relative, true)?;
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&parent, name, flags, Mode::from_raw_mode(FILE_MODE))?;
        let mut file = std::fs::File::from(fd);
        file.write_all(body)?;
        file.sync_all()
    }

    /// Renames `from` to `to` (replacing it); a link at either is moved or replaced, never followed.
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from_dir, from_name) = self.parent(from, false)?;
        let (to_dir, to_name) = self.parent(to, true)?;
        Ok(rustix::fs::renameat(&from_dir, from_name, &to_dir, to_name)?)
    }

    /// A second name `to` for the file `from`; fails with `AlreadyExists` when `to` exists.
    pub fn hard_link(&self, from: &str, to: &str) -> io::Result<()> {
        let (from_dir, from_name) = self.parent(from, false)?;
        let (to_dir, to_name) = self.parent(to, true)?;
        Ok(rustix::fs::linkat(
            &from_dir,
            from_name,
            &to_dir,
            to_name,
            AtFlags::empty(),
        )?)
    }

    pub fn remove_file(&self, relative: &str) -> io::Result<()> {
        let (parent, name) = self.parent(relative, false)?;
        Ok(rustix::fs::unlinkat(&parent, name, AtFlags::empty())?)
    }

    /// Removes the directory `relative` if it is empty.
    pub fn remove_dir(&self, relative: &str) -> io::Result<()> {
        let (parent, name) = self.parent(relative, false)?;
        Ok(rustix::fs::unlinkat(&parent, name, AtFlags::REMOVEDIR)?)
    }

    /// The entries of the directory `relative` (`""`: the root), unsorted,
    /// files with their size and modification time.
    pub fn list(&self, relative: &str) -> io::Result<Vec<Entry>> {
        let parts = components(relative)?;
        let fd = self.open_beneath(&parts, OFlags::RDONLY | OFlags::DIRECTORY)?;
        let mut out = Vec::new();
        for entry in rustix::fs::Dir::read_from(&fd)? {
            let entry = entry?;
            let name = entry.file_name();
            if name == c"." || name == c".." {
                continue;
            }
            // Files are stated on the open directory: one call, no path walk
            // (a listing of a busy day's segments stats thousands).
            let (kind, file) = match entry.file_type() {
                FileType::RegularFile | FileType::Unknown => {
                    match rustix::fs::statat(&fd, name, AtFlags::SYMLINK_NOFOLLOW) {
                        Ok(stat) => {
                            let kind = kind_of(FileType::from_raw_mode(stat.st_mode));
                            (kind, (kind == Kind::File).then(|| FileStat::of(&stat)))
                        }
                        // Removed since the directory was read: not listed.
                        Err(Errno::NOENT) => continue,
                        Err(_) => (Kind::Other, None),
                    }
                }
                file_type => (kind_of(file_type), None),
            };
            let name = name.to_string_lossy().into_owned();
            out.push(Entry { name, kind, file });
        }
        Ok(out)
    }
}

/// Whether `err` is the refusal of a link (`ELOOP` from `RESOLVE_NO_SYMLINKS`
/// or `O_NOFOLLOW`) or of a path leading out (`EXDEV` from `RESOLVE_BENEATH`).
pub fn is_link_refusal(err: &io::Error) -> bool {
    matches!(
        err.raw_os_error().map(Errno::from_raw_os_error),
        Some(Errno::LOOP) | Some(Errno::XDEV)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Beneath) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ws/sub")).unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        std::fs::write(dir.path().join("ws/sub/a.txt"), "inside").unwrap();
        let ws = Beneath::open(&dir.path().join("ws")).unwrap();
        (dir, ws)
    }

    fn both_resolvers(test: impl Fn()) {
        test();
        // The fallback walk, as on a kernel without openat2.
        let was = OPENAT2.swap(false, Ordering::Relaxed);
        test();
        OPENAT2.store(was, Ordering::Relaxed);
    }

    #[test]
    fn files_beneath_are_read_written_listed_and_renamed() {
        both_resolvers(|| {
            let (_dir, ws) = setup();
            assert_eq!(ws.read("sub/a.txt").unwrap(), b"inside");
            assert_eq!(ws.read("./sub//a.txt").unwrap(), b"inside");
            ws.write("new/deep/b.txt", b"bee").unwrap();
            assert_eq!(ws.read_prefix("new/deep/b.txt", 2).unwrap(), (b"be".to_vec(), 3));
            assert_eq!(ws.kind("new/deep").unwrap(), Some(Kind::Dir));
            assert_eq!(ws.kind("missing/x").unwrap(), None);
            ws.write_new("new/t", b"t").unwrap();
            assert_eq!(
                ws.write_new("new/t", b"t").unwrap_err().kind(),
                io::ErrorKind::AlreadyExists
            );
            ws.rename("new/t", "new/u").unwrap();
            ws.hard_link("new/u", "new/v").unwrap();
            ws.remove_file("new/u").unwrap();
            let mut entries = ws.list("new").unwrap();
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            let shown: Vec<_> = entries
                .iter()
                .map(|e| (e.name.as_str(), e.kind, e.file.map(|f| f.size)))
                .collect();
            assert_eq!(shown, [("deep", Kind::Dir, None), ("v", Kind::File, Some(1))]);
            let on_disk = std::fs::metadata(_dir.path().join("ws/new/v"))
                .unwrap()
                .modified()
                .unwrap();
            let nanos = on_disk.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            assert_eq!(entries[1].file.unwrap().modified, nanos);
            ws.remove_file("new/v").unwrap();
            ws.remove_file("new/deep/b.txt").unwrap();
            ws.remove_dir("new/deep").unwrap();
            assert_eq!(ws.kind("new/deep").unwrap(), None);
        });
    }

    #[test]
    fn links_and_paths_out_are_refused_at_the_open() {
        both_resolvers(|| {
            let (dir, ws) = setup();
            let root = dir.path().join("ws");
            std::os::unix::fs::symlink(dir.path().join("secret"), root.join("file-link")).unwrap();
            std::os::unix::fs::symlink(dir.path(), root.join("dir-link")).unwrap();
            std::os::unix::fs::symlink("sub", root.join("inner-link")).unwrap();
            for entry in ws.list("").unwrap() {
                if entry.name.ends_with("-link") {
                    assert_eq!((entry.kind, entry.file), (Kind::Other, None), "{}", entry.name);
                }
            }
            for path in ["file-link", "dir-link/secret", "inner-link/a.txt"] {
                let err = ws.read(path).unwrap_err();
                assert!(is_link_refusal(&err), "{path}: {err}");
            }
            assert!(ws.write("file-link", b"x").is_err());
            assert_eq!(
                std::fs::read_to_string(dir.path().join("secret")).unwrap(),
                "outside"
            );
            assert!(ws.write("dir-link/evil", b"x").is_err());
            assert!(!dir.path().join("evil").exists());
            for bad in ["../secret", "/etc/passwd", "a\0b", "sub/../../secret"] {
                assert_eq!(
                    ws.read(bad).unwrap_err().kind(),
                    io::ErrorKind::InvalidInput,
                    "{bad}"
                );
            }
            assert_eq!(ws.kind("file-link").unwrap(), Some(Kind::Other));
        });
    }

    #[test]
    fn a_fifo_is_refused_rather_than_blocking() {
        let (dir, ws) = setup();
        let status = std::process::Command::new("mkfifo")
            .arg(dir.path().join("ws/pipe"))
            .status()
            .unwrap();
        assert!(status.success());
        assert!(
            ws.read("pipe")
                .unwrap_err()
                .to_string()
                .contains("not a regular file")
        );
    }
}
