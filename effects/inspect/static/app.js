"use strict";
// The inspector page: the declared machine (from /api/machine), the turns (kept
// current by /api/events) and the selected turn's timeline. No library, no build.

const POSITIONS = {
  idle: [90, 210], streaming: [320, 210], dispatching: [580, 90],
  taking_stash: [580, 330], finished: [820, 210],
};
const BOX = [150, 56];
const SVG = "http://www.w3.org/2000/svg";
const turns = new Map();
let selected = null;
let machine = null;

function node(name, attributes, parent) {
  const element = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  if (parent) parent.appendChild(element);
  return element;
}

function drawMachine() {
  const svg = document.getElementById("machine");
  const defs = node("defs", {}, svg);
  const marker = node("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
    markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse" }, defs);
  node("path", { d: "M 0 0 L 10 5 L 0 10 z", fill: "#6b7280" }, marker);
  const pairs = new Map();
  for (const edge of machine.edges) {
    const key = `${edge.source}->${edge.dest}`;
    if (!pairs.has(key)) pairs.set(key, []);
    pairs.get(key).push(edge);
  }
  for (const [key, edges] of pairs) {
    const [source, dest] = key.split("->");
    const group = node("g", { class: "edge", id: `edge-${source}-${dest}` }, svg);
    node("title", {}, group).textContent = edges.map(e => `${e.move} (SPEC ${e.rules.join(" ")})`).join("\n");
    const [x1, y1] = POSITIONS[source];
    const [x2, y2] = POSITIONS[dest];
    let d, lx, ly;
    if (source === dest) {
      d = `M ${x1 - 30} ${y1 + BOX[1] / 2} C ${x1 - 60} ${y1 + 110}, ${x1 + 60} ${y1 + 110}, ${x1 + 30} ${y1 + BOX[1] / 2}`;
      [lx, ly] = [x1 - 20, y1 + 105];
    } else {
      const bend = source < dest ? 25 : -25;
      const [mx, my] = [(x1 + x2) / 2, (y1 + y2) / 2 + bend];
      const start = border(x1, y1, mx, my), end = border(x2, y2, mx, my);
      d = `M ${start[0]} ${start[1]} Q ${mx} ${my} ${end[0]} ${end[1]}`;
      [lx, ly] = [mx - 10, my - 4];
    }
    node("path", { d }, group);
    node("text", { x: lx, y: ly }, group).textContent = `${edges.length} move${edges.length > 1 ? "s" : ""}`;
  }
  for (const phase of machine.phases) {
    const [x, y] = POSITIONS[phase];
    const group = node("g", { class: "phase", id: `phase-${phase}`, "data-running": "0" }, svg);
    node("rect", { x: x - BOX[0] / 2, y: y - BOX[1] / 2, width: BOX[0], height: BOX[1] }, group);
    node("text", { x, y: y - 2 }, group).textContent = phase.toUpperCase();
    node("text", { x, y: y + 16, class: "count" }, group).textContent = "";
  }
  const exits = document.getElementById("exits");
  const byId = new Map(machine.edges.map(edge => [edge.id, edge]));
  for (const [status, ids] of Object.entries(machine.exits)) {
    const heading = document.createElement("h3");
    heading.textContent = `${status} (${ids.length})`;
    const list = document.createElement("ul");
    list.dataset.status = status;
    for (const id of ids) {
      const edge = byId.get(id);
      const item = document.createElement("li");
      item.textContent = `${edge.source} —${edge.move}→ finished (SPEC ${edge.rules.join(" ")})`;
      list.appendChild(item);
    }
    exits.append(heading, list);
  }
}

function border(x, y, towardX, towardY) {
  // Where the line from a box's centre toward a point leaves the box.
  const [dx, dy] = [towardX - x, towardY - y];
  const scale = Math.min(BOX[0] / 2 / Math.abs(dx || 1e-9), BOX[1] / 2 / Math.abs(dy || 1e-9));
  return [x + dx * scale, y + dy * scale];
}

function light() {
  const running = new Map(machine.phases.map(phase => [phase, 0]));
  for (const turn of turns.values()) {
    if (!turn.finished) running.set(turn.phase, (running.get(turn.phase) || 0) + 1);
  }
  const current = selected === null ? null : turns.get(selected);
  for (const [phase, count] of running) {
    const group = document.getElementById(`phase-${phase}`);
    group.dataset.running = String(count);
    group.classList.toggle("lit", count > 0);
    group.classList.toggle("current", current !== undefined && current !== null && current.phase === phase);
    group.querySelector(".count").textContent = count ? `${count} running` : "";
  }
}

function renderTurns() {
  const body = document.querySelector("#turns tbody");
  const rows = [...turns.values()].sort((a, b) => b.id - a.id);
  body.replaceChildren(...rows.map(turn => {
    const row = document.createElement("tr");
    row.dataset.turnId = String(turn.id);
    row.dataset.phase = turn.phase;
    row.classList.toggle("selected", turn.id === selected);
    row.classList.toggle("finished", turn.finished);
    for (const value of [turn.id, turn.channel, turn.attempt, turn.iteration, turn.phase, turn.status || "running"]) {
      const cell = document.createElement("td");
      cell.textContent = String(value);
      row.appendChild(cell);
    }
    row.addEventListener("click", () => select(turn.id));
    return row;
  }));
}

async function select(id) {
  selected = id;
  renderTurns();
  light();
  await loadTimeline();
}

async function loadTimeline() {
  if (selected === null) return;
  const response = await fetch(`/api/turns/${selected}`);
  if (!response.ok) return;
  const turn = await response.json();
  document.getElementById("timeline-title").textContent = `Turn ${turn.id} in ${turn.channel}`;
  document.getElementById("timeline-hint").hidden = true;
  const list = document.getElementById("timeline");
  list.replaceChildren(...turn.timeline.map(entry => {
    const item = document.createElement("li");
    item.dataset.kind = entry.kind;
    const kind = document.createElement("span");
    kind.className = "kind";
    kind.textContent = `${(entry.at_ms / 1000).toFixed(2)} s ${entry.kind}`;
    item.append(kind, entry.kind === "move" ? `${entry.source} —${entry.text}→ ${entry.dest} ` : entry.text);
    if (entry.rule) {
      const rule = document.createElement("span");
      rule.className = "rule";
      rule.textContent = `SPEC ${entry.rule}`;
      item.appendChild(rule);
    }
    return item;
  }));
  document.querySelectorAll(".edge.taken").forEach(edge => edge.classList.remove("taken"));
  const moves = turn.timeline.filter(entry => entry.kind === "move");
  const last = moves[moves.length - 1];
  if (last) document.getElementById(`edge-${last.source}-${last.dest}`)?.classList.add("taken");
}

function showView(exits) {
  document.getElementById("machine").style.display = exits ? "none" : "";
  document.getElementById("exits").hidden = !exits;
  document.getElementById("view-phases").classList.toggle("active", !exits);
  document.getElementById("view-exits").classList.toggle("active", exits);
}

async function start() {
  machine = await (await fetch("/api/machine")).json();
  drawMachine();
  for (const turn of await (await fetch("/api/turns")).json()) turns.set(turn.id, turn);
  renderTurns();
  light();
  document.getElementById("view-phases").addEventListener("click", () => showView(false));
  document.getElementById("view-exits").addEventListener("click", () => showView(true));
  const status = document.getElementById("connection");
  const events = new EventSource("/api/events");
  events.onopen = () => { status.dataset.state = "live"; status.textContent = "live"; };
  events.onerror = () => { status.dataset.state = "lost"; status.textContent = "reconnecting…"; };
  events.addEventListener("turns", message => {
    // Each changed turn is a row of values, named by update.fields.
    const update = JSON.parse(message.data);
    const changed = update.turns.map(row => Object.fromEntries(update.fields.map((field, index) => [field, row[index]])));
    for (const turn of changed) turns.set(turn.id, turn);
    for (const id of update.removed) turns.delete(id);
    renderTurns();
    light();
    if (selected !== null && changed.some(turn => turn.id === selected)) loadTimeline();
  });
}

start();
