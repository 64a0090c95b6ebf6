<<<<<<<< HEAD:frontend/build/_app/immutable/chunks/CCdobbs7.js
import{r as e}from"./CVb_9qEh.js";import"./Ck5cLG8P.js";var t={get data(){return e.data},get error(){return e.error},get form(){return e.form},get params(){return e.params},get route(){return e.route},get state(){return e.state},get status(){return e.status},get url(){return e.url}};export{t};
========
import{r as e}from"./CQ4HWX2L.js";import"./hOsC80Dy.js";var t={get data(){return e.data},get error(){return e.error},get form(){return e.form},get params(){return e.params},get route(){return e.route},get state(){return e.state},get status(){return e.status},get url(){return e.url}};export{t};
>>>>>>>> provconf:frontend/build/_app/immutable/chunks/DixDMSs3.js
