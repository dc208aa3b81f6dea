/* Small DOM helpers shared by the analytics pages (dashboard.js, rollout.js): loaded before them, read as
 * window.AnalyticsDom. Every text the server sends is set with textContent or escaped, never parsed as HTML. */
"use strict";

window.AnalyticsDom = (function () {
  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  function byId(id) {
    return document.getElementById(id);
  }

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) {
      var value = attrs[name];
      if (value === null || value === undefined) {
        return;
      }
      if (name === "text") {
        node.textContent = value;
      } else if (name === "className") {
        node.className = value;
      } else if (name.indexOf("data-") === 0) {
        node.setAttribute(name, typeof value === "object" ? JSON.stringify(value) : String(value));
      } else {
        node.setAttribute(name, value);
      }
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }

  return { escapeHtml: escapeHtml, byId: byId, el: el };
})();
