"""The report's stylesheet.

A Python module, not a .css package-data file: under ``flwr run`` / ``fedaudit deploy`` the
ServerApp imports fedaudit from Flower's app bundle (FAB), which carries only .py, .toml,
.md, .yaml and .json files (a rule users cannot widen), and writes the report there.
"""

CSS = """:root{--fg:#1d1f21;--mute:#5c6370;--line:#d8dbe0;--bg2:#f5f6f8}
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
 color:var(--fg);margin:0 auto;max-width:1180px;padding:24px 28px;line-height:1.45;font-size:14px}
h1{font-size:24px;margin:0 0 4px}h2{font-size:19px;margin:34px 0 6px;padding-top:10px;
 border-top:2px solid var(--line)}h3{font-size:15px;margin:18px 0 6px}
p.desc{color:var(--mute);margin:0 0 12px}
dl.facts{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0 0 14px}
dl.facts dt{color:var(--mute)}dl.facts dd{margin:0;word-break:break-all}
.cards{display:flex;flex-wrap:wrap;gap:10px}
.card{border:1px solid var(--line);border-radius:6px;padding:8px 12px;min-width:130px;
 background:var(--bg2)}
.card .k{font-size:12px;color:var(--mute)}.card .v{font-size:21px;font-weight:600}
.card .s{font-size:11.5px;color:var(--mute)}
nav{margin:18px 0 0;font-size:13px}nav a{margin-right:14px;color:#2b5797}
figure{margin:14px 0 22px;break-inside:avoid;page-break-inside:avoid}
figure img{max-width:100%;height:auto;display:block;border:1px solid var(--line)}
figcaption{font-size:13px;margin-top:6px;max-width:900px}
figcaption .note{color:var(--mute)}
.warning{border:2px solid #b45309;background:#fff7ed;padding:.5em .8em;border-radius:4px}
figure.absent figcaption,p.absent{color:var(--mute);font-style:italic;background:var(--bg2);
 padding:8px 12px;border-left:3px solid var(--line)}
figure.error figcaption{background:#fdecea;padding:8px 12px;border-left:3px solid #c62828}
p.guide,p.intro{max-width:900px}
.lowres{color:var(--mute);font-style:italic;cursor:help}
table{border-collapse:collapse;font-size:12.5px;margin:6px 0 10px}
th,td{border:1px solid var(--line);padding:3px 7px;text-align:left;vertical-align:middle}
th{background:var(--bg2);font-weight:600}
table.num td{text-align:right;font-variant-numeric:tabular-nums}
table.num td:first-child,table.num td.t{text-align:left}
.scroll{overflow-x:auto}
table.clients{font-size:12px}table.clients th,table.clients td{padding:2px 5px}
svg.spark{display:block;fill:#4c78a8}
div.toml{background:var(--bg2);border:1px solid var(--line);padding:10px 14px;
 column-width:330px;column-gap:28px;column-rule:1px solid var(--line)}
div.toml pre{margin:0 0 12px;font-size:12px;white-space:pre-wrap;overflow-wrap:anywhere;
 break-inside:avoid;page-break-inside:avoid}
footer{margin-top:30px;color:var(--mute);font-size:12px}
@media print{
 @page{size:A4;margin:14mm 12mm}
 body{max-width:none;padding:0;font-size:10.5pt}
 nav{display:none}
 h2{break-after:avoid;page-break-after:avoid}
 .keep{break-inside:avoid;page-break-inside:avoid}
 h3{break-after:avoid}
 section{break-before:auto}
 .scroll{overflow:visible}
 table{font-size:8.5pt}
 .card{background:none}
 figure img{border:none;max-height:235mm;width:auto;max-width:100%}
 tr{break-inside:avoid}
}
"""
