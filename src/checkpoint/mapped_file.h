// A weights file's bytes for the readers (safetensors.h, gguf.h): a read-only memory mapping
// of the file, or an owned copy of an image held in memory (fuzz targets, tests). Shared by
// the views handed out (a tensor keeps the mapping alive); thread-safe (read-only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"

namespace hypic {

class MappedFile {
 public:
  // Maps `path`. Errors say which file: absent (kNotFound, "<kind> file 'P' does not
  // exist"), not a regular file ("expected a <ext> file"), unreadable, unmappable. An empty
  // file maps to no bytes (the reader refuses it with its own message).
  static Result<std::shared_ptr<MappedFile>> map(const std::string& path, const std::string& kind,
                                                       const std::string& ext);
  static std::shared_ptr<MappedFile> copy(std::string bytes);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* bytes() const;
  uint64_t size() const { return addr_ ? len_ : copy_.size(); }
  // If [p, p + n) lies in the mapping: drops the pages wholly inside it from the resident set
  // (madvise DONTNEED; a later read faults them in from the file again) and returns true.
  // Memory that is not this mapping (a copy, another buffer) is left alone: false.
  bool release_pages(const void* p, size_t n) const;

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  size_t len_ = 0;
  std::string copy_;
};

}  // namespace hypic
