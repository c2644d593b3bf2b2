// The memory a model run needs, checked before the file is mapped: the tensor data (the file's
// size bounds it) plus the KV cache, against the memory the machine has available
// (/proc/meminfo MemAvailable, and in a container what its cgroup's memory limit leaves) or a
// limit the user sets (--max-memory). Refused with both sizes,
// so a model that cannot fit fails at start-up with a clear message instead of thrashing or
// being killed mid-request.
#pragma once

#include <cstdint>
#include <string>

#include "base/result.h"

namespace ggflow::runtime {

// "1.5 GiB", "320.0 MiB", "12 KiB", "512 B".
std::string format_bytes(int64_t bytes);

// The memory this process can still take: MemAvailable, or less where its cgroup's memory limit
// minus the cgroup's usage is less; -1 where neither can be read (then only `max_memory` applies).
// `where` (if given) says which of the two it is, for messages.
int64_t available_memory(std::string* where = nullptr);

// Errors when file + kv_bytes exceeds max_memory (> 0) or the available memory.
Status check_memory_budget(const std::string& path, int64_t kv_bytes, int64_t max_memory);

// The same with --max-memory as the user wrote it ("" : no limit but the available memory).
Status check_memory_budget(const std::string& path, int64_t kv_bytes, const std::string& max_memory_flag);

// "8GiB", "512MiB", "1000000" (bytes) -> bytes. Errors name the flag.
Result<int64_t> parse_bytes(const std::string& flag, const std::string& text);

}  // namespace ggflow::runtime
