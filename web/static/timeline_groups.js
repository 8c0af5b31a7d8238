// The timeline's lane groups: which rows it draws, in which collapsible group, for one
// trace or for a job's ranks on one clock. timeline.js asks for the rows and draws them.
//
// One trace: its GPU lanes, its counters, then per process (when there are several) a
// group of its threads, each thread a group of its flame-chart rows. A job's ranks: one
// group per rank (its GPU lanes and counters, then a "host threads" group holding its
// processes and threads as above); a rank's host lanes (and memory counters) are fetched
// only while its host group is open, so a job of many ranks asks for GPU lanes alone until one is opened.
//
// Group keys: a thread's is its "pid:tid", a process's "p<pid>"; in a job each is prefixed
// with "r<rank>/", a rank's own is "r<rank>" and its host group's "r<rank>/host". Closed
// groups (and a job's open host groups) are kept in the address as tlg and tlh.
"use strict";
window.TimelineGroups = (function () {
  function header(key, label, level, open, extra) {
    return Object.assign({ kind: "header", key: key, label: label, level: level, open: open }, extra || {});
  }

  // A trace's host lanes (in the server's order: by pid, tid, then row) as rows.
  function hostRows(lanes, prefix, level, st, rank, out) {
    const pids = new Set(lanes.map((l) => l.thread.split(":")[0]));
    const byProcess = pids.size > 1;
    let proc = null, thread = null;
    for (const lane of lanes) {
      if (lane.row === "py" && !st.showPython) continue;
      const pid = lane.thread.split(":")[0];
      let lv = level;
      if (byProcess) {
        const pk = prefix + "p" + pid;
        if (pid !== proc) {
          proc = pid;
          thread = null;
          out.push(header(pk, "process " + pid, level, !st.collapsed.has(pk), { rank: rank, process: true }));
        }
        if (st.collapsed.has(pk)) continue;
        lv = level + 1;
      }
      const tk = prefix + lane.thread;
      if (lane.thread !== thread) {
        thread = lane.thread;
        out.push(header(tk, lane.thread_label, lv, !st.collapsed.has(tk), { rank: rank }));
      }
      if (st.collapsed.has(tk)) continue;
      out.push({ kind: "lane", lane: lane, level: lv + 1 });
    }
  }

  // The rows of an answer: headers, lanes, and where each trace's counters go.
  // st: {collapsed: Set of keys, hostRanks: Set of ranks, showPython, rankLabel(rank)}.
  function rows(data, st) {
    const out = [];
    if (!data.ranks) {
      for (const lane of data.lanes) if (!lane.thread) out.push({ kind: "lane", lane: lane, level: 0 });
      out.push({ kind: "counters", rank: null });
      hostRows(data.lanes.filter((l) => l.thread), "", 0, st, null, out);
      return out;
    }
    const byRank = new Map();
    for (const lane of data.lanes) {
      if (!byRank.has(lane.rank)) byRank.set(lane.rank, []);
      byRank.get(lane.rank).push(lane);
    }
    for (const r of data.ranks) {
      const rk = "r" + r.rank;
      const open = !st.collapsed.has(rk);
      out.push(header(rk, st.rankLabel(r), 0, open, { rank: r.rank, rankGroup: true }));
      if (!open) continue;
      const lanes = byRank.get(r.rank) || [];
      for (const lane of lanes) if (!lane.thread) out.push({ kind: "lane", lane: lane, level: 1 });
      // its GPUs' busy share (and memory, once its host answer came) beside its GPU lanes
      out.push({ kind: "counters", rank: r.rank });
      if (!r.host_lanes) continue;
      const hostOpen = st.hostRanks.has(r.rank);
      out.push(header(rk + "/host", "host threads", 1, hostOpen, { rank: r.rank, host: true }));
      // until the answer for an opened group comes, the group stays empty
      if (!hostOpen || !r.host) continue;
      hostRows(lanes.filter((l) => l.thread), rk + "/", 2, st, r.rank, out);
    }
    return out;
  }

  function readList(q, name) {
    return (q.get(name) || "").split(",").filter((x) => x);
  }

  return { rows: rows, readList: readList };
})();
