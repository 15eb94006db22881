#include "checkpoint/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hypic {

Result<std::shared_ptr<MappedFile>> MappedFile::map(const std::string& path, const std::string& kind,
                                                          const std::string& ext) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT) return not_found(kind + " file '" + path + "' does not exist");
    return io_error("cannot open " + kind + " file '" + path + "': " + std::strerror(e));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return io_error("cannot stat '" + path + "': " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("'" + path + "' is not a regular file; expected a " + ext + " file");
  }
  std::shared_ptr<MappedFile> f(new MappedFile);
  if (st.st_size > 0) {
    void* addr = ::mmap(nullptr, size_t(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    const int e = errno;
    if (addr == MAP_FAILED) {
      ::close(fd);
      return io_error("cannot memory-map '" + path + "': " + std::strerror(e));
    }
    f->addr_ = addr;
    f->len_ = size_t(st.st_size);
  }
  ::close(fd);
  return f;
}

std::shared_ptr<MappedFile> MappedFile::copy(std::string bytes) {
  std::shared_ptr<MappedFile> f(new MappedFile);
  f->copy_ = std::move(bytes);
  return f;
}

MappedFile::~MappedFile() {
  if (addr_) ::munmap(addr_, len_);
}

const uint8_t* MappedFile::bytes() const {
  return addr_ ? static_cast<const uint8_t*>(addr_) : reinterpret_cast<const uint8_t*>(copy_.data());
}

bool MappedFile::release_pages(const void* p, size_t n) const {
  const auto* a = static_cast<const uint8_t*>(addr_);
  const auto* q = static_cast<const uint8_t*>(p);
  if (a == nullptr || q < a || q + n > a + len_) return false;
  const uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
  const uintptr_t b = (uintptr_t(q) + page - 1) / page * page, e = (uintptr_t(q) + n) / page * page;
  if (e > b) ::madvise(reinterpret_cast<void*>(b), e - b, MADV_DONTNEED);
  return true;
}

}  // namespace hypic
