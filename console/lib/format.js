// How figures read on the page. Each figure also keeps its raw value in data-value so a test
// (or a user's script) can compare it with the API's.

export function when(iso) {
  if (!iso) return "—";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit",
  });
}

export function seconds(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 120) return `${value.toFixed(value < 10 ? 2 : 1)} s`;
  if (value < 7200) return `${(value / 60).toFixed(1)} min`;
  return `${(value / 3600).toFixed(1)} h`;
}

export function between(startIso, endIso) {
  if (!startIso) return null;
  const end = endIso ? new Date(endIso) : new Date();
  return (end.getTime() - new Date(startIso).getTime()) / 1000;
}

export function bytes(value) {
  if (value === null || value === undefined) return "—";
  if (value < 1024) return `${value} B`;
  const units = ["KB", "MB", "GB", "TB"];
  let size = value / 1024;
  let unit = 0;
  while (size >= 1024 && unit < units.length - 1) {
    size /= 1024;
    unit += 1;
  }
  return `${size.toFixed(1)} ${units[unit]}`;
}

export function percent(rate) {
  if (rate === null || rate === undefined) return "—";
  return `${(rate * 100).toFixed(1)} %`;
}

export function usd(value) {
  if (value === null || value === undefined) return "—";
  return value < 0.01 && value > 0 ? `$${value.toFixed(6)}` : `$${value.toFixed(4)}`;
}

export function json(value) {
  return JSON.stringify(value, null, 2);
}

export function isoDay(date) {
  return date.toISOString().slice(0, 10);
}
