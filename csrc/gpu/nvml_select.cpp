// gpu: the GPU selection (see nvml_select.hpp).
#include "gpu/nvml_select.hpp"

#include <cctype>
#include <cstring>

namespace sysprof {
namespace nvml {
namespace {

constexpr const char* kPrefix = "gpu:select:";

std::string upper(std::string s) {
  for (char& c : s) c = char(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

std::string text(Device h, int dev, GetStringFn fn, const char* what, Calls& calls) {
  char buf[kUuidBufferSize > kNameBufferSize ? kUuidBufferSize : kNameBufferSize] = {};
  if (!fn) return "";
  auto f = [&] { return fn(h, buf, kUuidBufferSize); };
  if (calls.call(what, dev, make_call(f)) != kSuccess) return "";
  return std::string(buf, strnlen(buf, sizeof buf));
}

std::string pci_bus_id(const Library& lib, Device h, int dev, Calls& calls) {
  if (!lib.get_pci) return "";
  PciInfo pci;
  std::memset(&pci, 0, sizeof pci);
  auto f = [&] { return lib.get_pci(h, &pci); };
  if (calls.call("nvmlDeviceGetPciInfo_v3", dev, make_call(f)) != kSuccess) return "";
  return std::string(pci.busId, strnlen(pci.busId, sizeof pci.busId));
}

}  // namespace

Selection parse_selection(const std::vector<std::string>& options) {
  Selection sel;
  for (const std::string& o : options) {
    if (!starts_with(o, kPrefix)) continue;
    sel.active = true;
    std::string rest = o.substr(std::strlen(kPrefix));
    if (rest == "cuda") {
      sel.cuda = true;
      continue;
    }
    size_t colon = rest.find(':');
    if (colon == std::string::npos) continue;  // "none", or malformed
    Selector s{rest.substr(0, colon), rest.substr(colon + 1)};
    if (s.kind != "index") s.value = upper(s.value);
    sel.entries.push_back(std::move(s));
  }
  return sel;
}

bool mig_instances(const Library& lib, Device h, int dev, Calls& calls, std::vector<std::string>& uuids) {
  uuids.clear();
  if (!lib.get_mig_mode || !lib.get_max_mig || !lib.get_mig_handle) return false;
  unsigned current = 0, pending = 0, count = 0;
  auto mode = [&] { return lib.get_mig_mode(h, &current, &pending); };
  if (calls.call("nvmlDeviceGetMigMode", dev, make_call(mode)) != kSuccess || current != kMigEnable) return false;
  auto max = [&] { return lib.get_max_mig(h, &count); };
  if (calls.call("nvmlDeviceGetMaxMigDeviceCount", dev, make_call(max)) != kSuccess) return true;
  for (unsigned i = 0; i < count; ++i) {
    Device mig = nullptr;
    auto get = [&] { return lib.get_mig_handle(h, i, &mig); };
    if (calls.call("nvmlDeviceGetMigDeviceHandleByIndex", dev, make_call(get)) != kSuccess || !mig) continue;
    std::string u = text(mig, dev, lib.get_uuid, "nvmlDeviceGetUUID", calls);
    if (!u.empty()) uuids.push_back(u);
  }
  return true;
}

std::vector<size_t> select_devices(const Library& lib, const std::vector<std::pair<unsigned, Device>>& all,
                                   const Selection& sel, Calls& calls) {
  std::vector<size_t> out;
  if (!sel.active) {
    for (size_t i = 0; i < all.size(); ++i) out.push_back(i);
    return out;
  }
  bool need_uuid = false, need_pci = false, need_mig = false;
  for (const Selector& s : sel.entries) {
    need_uuid |= s.kind == "uuid";
    need_pci |= s.kind == "pci";
    need_mig |= s.kind == "mig";
  }
  std::vector<std::string> uuid(all.size()), pci(all.size());
  std::vector<std::vector<std::string>> migs(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const int dev = int(all[i].first);
    if (need_uuid) uuid[i] = upper(text(all[i].second, dev, lib.get_uuid, "nvmlDeviceGetUUID", calls));
    if (need_pci) pci[i] = upper(pci_bus_id(lib, all[i].second, dev, calls));
    if (need_mig) {
      mig_instances(lib, all[i].second, dev, calls, migs[i]);
      for (std::string& u : migs[i]) u = upper(u);
    }
  }
  std::string unmatched;
  for (const Selector& s : sel.entries) {
    size_t found = all.size();
    for (size_t i = 0; i < all.size() && found == all.size(); ++i) {
      if (s.kind == "index" && std::to_string(all[i].first) == s.value) found = i;
      if (s.kind == "uuid" && !uuid[i].empty() && starts_with(uuid[i], s.value)) found = i;
      if (s.kind == "pci" && !pci[i].empty() && pci[i] == s.value) found = i;
      if (s.kind == "mig")
        for (const std::string& u : migs[i])
          if (starts_with(u, s.value)) found = i;
    }
    if (found == all.size()) {
      unmatched += (unmatched.empty() ? "" : ", ") + s.kind + " " + s.value;
      continue;
    }
    bool seen = false;
    for (size_t k : out) seen |= k == found;
    if (!seen) out.push_back(found);
  }
  if (!unmatched.empty()) calls.note("gpu selection: no GPU matches " + unmatched);
  return out;
}

}  // namespace nvml
}  // namespace sysprof
