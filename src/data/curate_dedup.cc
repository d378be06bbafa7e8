// Curation passes 2 and 3: per key partition, group equal keys across all
// chunks into duplicate links (band-key links confirmed by the signatures'
// Jaccard estimate); then union-find over all links decides what is removed.
#include <algorithm>
#include <unordered_map>

#include "core/checked_file.h"
#include "data/curate.h"
#include "data/curate_internal.h"

namespace crucible::data {
namespace {

// Appends section `section` of a chunk's keys file (verified) to *out.
Status read_keys(const std::string& path, size_t section, std::vector<KeyRecord>* out) {
  auto r = CheckedReader::open(path);
  if (!r) return r.status();
  std::string buf;
  CRUCIBLE_RETURN_IF_ERROR(r->read(section, &buf));
  if (buf.size() % sizeof(KeyRecord) != 0)
    return Status::corrupt("[curate] " + path + ": key section of " + std::to_string(buf.size()) + " bytes");
  size_t n = buf.size() / sizeof(KeyRecord);
  if (n == 0) return Status::ok();  // (memcpy from an empty buffer: a null pointer)
  size_t at = out->size();
  out->resize(at + n);
  std::memcpy(out->data() + at, buf.data(), buf.size());
  return Status::ok();
}

// Links every member of a group of equal keys to the group's smallest id (a
// star, not all pairs: a document repeated 10^4 times gives 10^4 links, not 10^8).
void star_links(std::vector<KeyRecord>& recs, std::vector<std::pair<uint64_t, uint64_t>>* links) {
  std::sort(recs.begin(), recs.end());
  for (size_t i = 0; i < recs.size();) {
    size_t j = i + 1;
    while (j < recs.size() && recs[j].key == recs[i].key) ++j;
    for (size_t k = i + 1; k < j; ++k)
      if (recs[k].id != recs[i].id) links->push_back({recs[i].id, recs[k].id});
    i = j;
  }
  std::sort(links->begin(), links->end());
  links->erase(std::unique(links->begin(), links->end()), links->end());
}

// Fingerprints of the documents in `ids` (sorted), read section by section
// from the chunks' signature files (each section verified).
Status load_fingerprints(const std::vector<uint64_t>& ids, int h, const CurateLayout& layout,
                         std::unordered_map<uint64_t, const uint32_t*>* out,
                         std::vector<std::string>* storage) {
  storage->reserve(ids.size());
  size_t i = 0;
  while (i < ids.size()) {
    const size_t chunk = id_chunk(ids[i]);
    auto r = CheckedReader::open(layout.sigs(chunk));
    if (!r) return r.status();
    while (i < ids.size() && id_chunk(ids[i]) == chunk) {
      const size_t section = id_index(ids[i]) / kSigsPerSection;
      storage->emplace_back();
      std::string& buf = storage->back();
      CRUCIBLE_RETURN_IF_ERROR(r->read(section, &buf));
      for (; i < ids.size() && id_chunk(ids[i]) == chunk && id_index(ids[i]) / kSigsPerSection == section;
           ++i) {
        size_t at = (id_index(ids[i]) % kSigsPerSection) * size_t(h) * 4;
        if (at + size_t(h) * 4 > buf.size())
          return Status::corrupt("[curate] " + layout.sigs(chunk) + ": no signature for document " +
                                 std::to_string(id_index(ids[i])));
        (*out)[ids[i]] = reinterpret_cast<const uint32_t*>(buf.data() + at);
      }
    }
  }
  return Status::ok();
}

}  // namespace

Status dedup_partition(const CurateSpec& spec, const CurationPlan& plan, int partition,
                       const CurateLayout& layout) {
  const size_t P = size_t(plan.partitions);
  std::vector<EdgeRecord> edges;
  // exact-hash keys: a link is a duplicate (64-bit hash of the whole text).
  if (spec.settings.exact_dedup) {
    std::vector<KeyRecord> recs;
    for (size_t c = 0; c < plan.chunks.size(); ++c)
      CRUCIBLE_RETURN_IF_ERROR(read_keys(layout.keys(c), size_t(partition), &recs));
    std::vector<std::pair<uint64_t, uint64_t>> links;
    star_links(recs, &links);
    for (auto [a, b] : links) edges.push_back({a, b, uint32_t(DupKind::kExact), 1.0f});
  }
  if (spec.settings.near_dedup) {
    std::vector<KeyRecord> recs;
    for (size_t c = 0; c < plan.chunks.size(); ++c)
      CRUCIBLE_RETURN_IF_ERROR(read_keys(layout.keys(c), P + size_t(partition), &recs));
    std::vector<std::pair<uint64_t, uint64_t>> links;
    star_links(recs, &links);
    recs = {};
    std::vector<uint64_t> ids;
    for (auto [a, b] : links) ids.insert(ids.end(), {a, b});
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const int h = spec.near.bands * spec.near.rows;
    std::unordered_map<uint64_t, const uint32_t*> fp;
    std::vector<std::string> storage;
    CRUCIBLE_RETURN_IF_ERROR(load_fingerprints(ids, h, layout, &fp, &storage));
    for (auto [a, b] : links) {
      double j = estimate_jaccard(fp[a], fp[b], h);
      if (j >= spec.near.threshold) edges.push_back({a, b, uint32_t(DupKind::kNear), float(j)});
    }
  }
  std::string payload(reinterpret_cast<const char*>(edges.data()), edges.size() * sizeof(EdgeRecord));
  return write_checked(layout.edges(partition), payload);
}

Result<std::vector<Removal>> resolve_duplicates(const CurationPlan& plan, const CurateLayout& layout) {
  std::vector<EdgeRecord> edges;
  for (int p = 0; p < plan.partitions; ++p) {
    auto buf = read_checked(layout.edges(p));
    if (!buf) return buf.status();
    if (buf->size() % sizeof(EdgeRecord) != 0)
      return Status::corrupt("[curate] " + layout.edges(p) + ": truncated edge records");
    if (buf->empty()) continue;
    size_t at = edges.size();
    edges.resize(at + buf->size() / sizeof(EdgeRecord));
    std::memcpy(edges.data() + at, buf->data(), buf->size());
  }
  // Union-find with the smaller id as root: a cluster's root is its smallest
  // id, whatever order the links come in, so every rank (and every run) keeps
  // the same representative.
  std::unordered_map<uint64_t, uint64_t> parent;
  parent.reserve(edges.size() * 2);
  auto find = [&](uint64_t x) {
    auto it = parent.find(x);
    if (it == parent.end()) {
      parent.emplace(x, x);
      return x;
    }
    uint64_t root = x;
    while (parent[root] != root) root = parent[root];
    while (parent[x] != root) {  // path compression
      uint64_t next = parent[x];
      parent[x] = root;
      x = next;
    }
    return root;
  };
  for (const auto& e : edges) {
    uint64_t ra = find(e.a), rb = find(e.b);
    if (ra == rb) continue;
    if (ra < rb)
      parent[rb] = ra;
    else
      parent[ra] = rb;
  }
  // Kind and similarity: an exact link to a document makes it an exact
  // duplicate; otherwise its best near link.
  std::unordered_map<uint64_t, std::pair<DupKind, float>> how;
  for (const auto& e : edges) {
    auto [it, fresh] = how.try_emplace(e.b, DupKind(e.kind), e.similarity);
    if (fresh) continue;
    if (DupKind(e.kind) == DupKind::kExact)
      it->second = {DupKind::kExact, 1.0f};
    else if (it->second.first == DupKind::kNear)
      it->second.second = std::max(it->second.second, e.similarity);
  }
  std::vector<uint64_t> members;
  members.reserve(parent.size());
  for (const auto& [id, _] : parent) members.push_back(id);
  std::vector<Removal> out;
  for (uint64_t id : members) {
    uint64_t root = find(id);
    if (root == id) continue;
    Removal r{id, root, DupKind::kNear, 0};
    auto it = how.find(id);
    if (it != how.end()) {
      r.kind = it->second.first;
      r.similarity = it->second.second;
    } else {
      // Only ever linked as the smaller end: it reaches the root through
      // documents linked to it; count it as a near duplicate of the root.
      r.similarity = 0;
    }
    out.push_back(r);
  }
  std::sort(out.begin(), out.end(), [](const Removal& a, const Removal& b) { return a.id < b.id; });
  return out;
}

}  // namespace crucible::data
